"""The README's MCP setup, exactly as written: a fresh venv, the documented install, the server started as the
documented client configuration says, and the SDK's own client speaking MCP to it.

SLOW (about 30-90 s: two fresh virtual environments and pip installs from the package index). Skipped when
the index cannot be reached, except under CI, where it must run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_DIR = os.path.dirname(os.path.abspath(km.__file__))     # the module under test and its MCP server
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

try:
    from mcp import ClientSession, StdioServerParameters, stdio_client
except ImportError:
    ClientSession = None

pytestmark = pytest.mark.skipif(
    ClientSession is None and not IN_CI, reason="the 'mcp' package is not installed here (dev extra); CI runs these")
README = os.path.join(ROOT, "README.md")


def readme_block(marker: str) -> str:
    readme = open(README, encoding="utf-8").read()
    match = re.search(rf"<!-- {re.escape(marker)} -->\s*```(?:bash|json)\n(.+?)\n```", readme, flags=re.S)
    assert match, f"README must carry the block marked <!-- {marker} -->"
    return match.group(1)


def index_reachable() -> bool:
    import socket
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def network():
    if not IN_CI and not index_reachable():
        pytest.skip("the package index is not reachable; CI runs this")


def run_shell(script: str, placeholder: str, where: str) -> None:
    """Run a README bash block with its example path replaced by a real one."""
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script.replace(placeholder, where)], cwd=where,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def server_from_config(block: str, replacements: dict[str, str]) -> dict:
    text = block
    for old, new in replacements.items():
        text = text.replace(old, new)
    return json.loads(text)["mcpServers"]["kumiho-memory"]


def failed(reply) -> bool:       # SDK 2.x names fields in snake_case, 1.x in camelCase
    return bool(getattr(reply, "is_error", getattr(reply, "isError", False)))


def structured(reply):
    return getattr(reply, "structured_content", getattr(reply, "structuredContent", None))


async def speak_mcp(server: dict, db: str) -> None:
    parameters = StdioServerParameters(command=server["command"], args=server.get("args", []),
                                       env={**server.get("env", {}), "PATH": os.environ.get("PATH", "")})
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert {"kumiho_memory_recall", "kumiho_memory_reflect", "kumiho_memory_list"} <= tools
            reply = await session.call_tool("kumiho_memory_recall", {"query": "which mode does the user like"})
            assert not failed(reply), reply
            assert "dark mode" in json.dumps(structured(reply))
            listed = await session.call_tool("kumiho_memory_list", {"limit": 5})
            assert not failed(listed), listed
            assert "dark mode" in json.dumps(structured(listed))


def seed(db: str) -> None:
    with km.Memory(db) as memory:
        memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")


def test_single_file_setup_exactly_as_the_readme_says(tmp_path, network):
    home = str(tmp_path / "kumiho")
    os.makedirs(home)
    install = readme_block("mcp-install:single-file")
    # the README copies the two files from the current directory: run it from the module's folder
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", install.replace("/home/you/kumiho", home)],
                          cwd=MODULE_DIR, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    server = server_from_config(readme_block("mcp-config:single-file"), {"/home/you/kumiho": home})
    assert server["command"] == os.path.join(home, ".venv", "bin", "python")
    seed(server["env"]["KUMIHO_MEMORY_PATH"])
    asyncio.run(speak_mcp(server, server["env"]["KUMIHO_MEMORY_PATH"]))


def test_a_missing_mcp_package_names_a_command_that_works(tmp_path):
    home = tmp_path / "bare"
    home.mkdir()
    for name in ("kumiho_memory.py", "kumiho_memory_mcp.py"):
        shutil.copy(os.path.join(MODULE_DIR, name), home / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home / ".venv")], check=True, timeout=120)
    done = subprocess.run([str(home / ".venv" / "bin" / "python"), str(home / "kumiho_memory_mcp.py")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "pip install mcp" in done.stderr and "pip install -e '.[mcp]'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_installed_checkout_setup_exactly_as_the_readme_says(tmp_path, network):
    checkout = tmp_path / "kumiho_memory"
    checkout.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, name), checkout / name)
    for name in ("kumiho_memory.py", "kumiho_memory_mcp.py"):
        shutil.copy(os.path.join(MODULE_DIR, name), checkout / name)
    run_shell(readme_block("mcp-install:checkout"), "/home/you/kumiho_memory", str(checkout))
    db = str(tmp_path / "memory.db")
    server = server_from_config(readme_block("mcp-config:checkout"),
                                {"/home/you/kumiho_memory": str(checkout), "/home/you/kumiho/memory.db": db})
    assert server["command"] == str(checkout / ".venv" / "bin" / "kumiho-memory-mcp")
    seed(db)
    asyncio.run(speak_mcp(server, db))
