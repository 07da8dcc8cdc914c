"""Red-team probe for the privacy layer, written independently of the detection rules and their corpus.

Usage: python probes/privacy_redteam.py [--seed N] [--quiet]

Every sample here was written from the providers' documented token formats (prefix, length, alphabet) and
from common configuration syntaxes; nothing was copied from a scanner's test file or regex, and the
detection code was not read. Writes probes/results/privacy_redteam.json.

Scoring
- credential true positive: caught when no secret string of the sample survives in
  ``redact_credential_text(line)[0]``. "context" = the token sits in a config/code/CLI line; "bare" = the
  token is bare inside a chat sentence. Bare samples are split into "bare" (provider-prefixed tokens, which
  a scanner should know) and "bare_random" (unprefixed but random-looking mixed-case tokens).
  Families whose token is only hex or a UUID with no prefix are tested in context only (a bare 40-hex
  string is indistinguishable from a git SHA).
- false positive: a line of the FP corpus counts as changed when redaction changes it at all.
- PII: caught when the value is no longer present in ``anonymize_pii_text(line)``; look-alikes count as
  changed when ``anonymize_pii_text`` changes them at all.
- "ambiguous" lines (publishable keys, doc example JWT, famous test card numbers, ...) are reported but
  counted neither way.

Decision on Stripe test keys: ``sk_test_``/``rk_test_`` keys with random bodies are counted as SECRETS
(family stripe_secret_test / stripe_restricted_test): they authenticate to the Stripe API and expose a
test-mode account's data and configuration, and GitHub secret scanning / gitleaks flag them. The single key
Stripe prints in its public docs (sk_test_4eC39HqLyjWDarjtT1zdp7dc) is a documented example and sits in the
false-positive corpus, like AKIAIOSFODNN7EXAMPLE. Publishable keys (pk_live_/pk_test_) are public by
design and are "ambiguous".
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import random
import string
import time
import uuid
import zlib

from _common import km, write_results

DIG = string.digits
LOW = string.ascii_lowercase
UPP = string.ascii_uppercase
LET = string.ascii_letters
AN = LET + DIG
UP_AN = UPP + DIG
LO_AN = LOW + DIG
HEX = "0123456789abcdef"
B64 = AN + "+/"
URLB = AN + "-_"
B32UP = UPP + "234567"
B32LO = LOW + "234567"
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

R = random.Random(0)  # reseeded in main()


def r(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def d(n: int) -> str:
    return str(R.randint(1, 9)) + r(DIG, n - 1)


def uid() -> str:
    return str(uuid.UUID(int=R.getrandbits(128), version=4))


def b62(value: int, width: int = 6) -> str:
    out = ""
    while value:
        value, rem = divmod(value, 62)
        out = B62[rem] + out
    return out.rjust(width, "0")


def gh(prefix: str) -> str:
    body = r(AN, 30)
    return prefix + body + b62(zlib.crc32(body.encode()) & 0xFFFFFFFF)


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def jwt(payload: dict) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64url(json.dumps(payload, separators=(",", ":")).encode())
    return f"{header}.{body}.{r(URLB, 43)}"


def password_random() -> str:
    pw = r(AN + "!$^*-_+=.~", 14) + R.choice("!$^*~") + R.choice(DIG)
    return pw


def password_wordy() -> str:
    word = R.choice(["Summer", "Winter", "Falcon", "Marigold", "Tiger", "Orange", "Velvet", "Rocket", "Harbor"])
    return f"{word}{R.randint(1970, 2029)}{R.choice('!$*~.')}{r(AN, 3)}"


def passphrase() -> str:
    words = ["correct", "horse", "battery", "staple", "lantern", "copper", "meadow", "violet", "gravel", "quartz",
             "banjo", "pepper", "walnut", "glacier", "ember", "saddle"]
    return "-".join(R.sample(words, 4)) + str(R.randint(10, 99))


# --------------------------------------------------------------------------------------------------------------
# Provider families. kind: "prefixed" (bare tested as "bare"), "random" (bare tested as "bare_random"),
# "context" (hex/uuid only: context only), "url" (value is a URL; secret = a part of it).
# gen returns either a token string or (value, [secrets]).
# --------------------------------------------------------------------------------------------------------------

FAMILIES: list[tuple[str, object, str, str]] = []


def F(name: str, gen, env: str, kind: str = "prefixed") -> None:
    FAMILIES.append((name, gen, env, kind))


def _azure_client_secret() -> str:
    return r(AN + "_~.", 3) + R.choice(DIG) + "Q~" + r(AN + "_~.-", 34)


def _sas_url() -> tuple[str, list[str]]:
    sig = base64.b64encode(R.randbytes(32)).decode().replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    url = ("https://prodassets.blob.core.windows.net/exports/report.csv?sv=2022-11-02&ss=b&srt=sco&sp=rl"
           f"&se=2026-01-01T00:00:00Z&st=2025-01-01T00:00:00Z&spr=https&sig={sig}")
    return url, [sig]


def _slack_webhook() -> tuple[str, list[str]]:
    secret = r(AN, 24)
    return f"https://hooks.slack.com/services/T{r(UP_AN, 8)}/B{r(UP_AN, 10)}/{secret}", [secret]


def _discord_webhook() -> tuple[str, list[str]]:
    secret = r(URLB, 68)
    return f"https://discord.com/api/webhooks/{d(19)}/{secret}", [secret]


def _teams_webhook() -> tuple[str, list[str]]:
    secret = r(HEX, 32)
    return (f"https://contoso.webhook.office.com/webhookb2/{uid()}@{uid()}/IncomingWebhook/{secret}/{uid()}",
            [secret])


def _zapier_webhook() -> tuple[str, list[str]]:
    secret = r(LO_AN, 7)
    return f"https://hooks.zapier.com/hooks/catch/{d(8)}/{secret}/", [secret]


def _twitter_bearer() -> str:
    return "A" * 22 + r(AN, 20) + "%2B" + r(AN, 24) + "%3D" + r(AN, 40)


def _pem(kind: str) -> tuple[str, list[str]]:
    starts = {"RSA PRIVATE KEY": "MIIEpAIBAAKCAQEA", "EC PRIVATE KEY": "MHcCAQEEI", "PRIVATE KEY":
              "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "ENCRYPTED PRIVATE KEY": "MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG",
              "DSA PRIVATE KEY": "MIIBuwIBAAKBgQ", "OPENSSH PRIVATE KEY": "b3BlbnNzaC1rZXktdjEAAAAA"}
    if kind == "PGP PRIVATE KEY BLOCK":
        lines = ["lQOYBG" + r(B64, 58)] + [r(B64, 64) for _ in range(8)] + [r(B64, 30) + "="]
        block = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(lines) + "\n=" + r(B64, 4)
                 + "\n-----END PGP PRIVATE KEY BLOCK-----")
        return block, lines[:-1]
    first = starts[kind]
    lines = [first + r(B64, 64 - len(first))] + [r(B64, 64) for _ in range(9)] + [r(B64, 20) + "=="]
    block = f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----"
    return block, lines[:-1]


def _k8s_data() -> tuple[str, list[str]]:
    pw = password_random()
    enc = base64.b64encode(pw.encode()).decode()
    return enc, [enc]


def define_families() -> None:
    FAMILIES.clear()
    # GitHub
    F("github_pat_classic", lambda: gh("ghp_"), "GITHUB_TOKEN")
    F("github_oauth", lambda: gh("gho_"), "GH_OAUTH_TOKEN")
    F("github_user_to_server", lambda: gh("ghu_"), "GITHUB_USER_TOKEN")
    F("github_server_to_server", lambda: gh("ghs_"), "GITHUB_APP_TOKEN")
    F("github_refresh", lambda: gh("ghr_"), "GITHUB_REFRESH_TOKEN")
    F("github_fine_grained_pat", lambda: "github_pat_" + r(AN, 22) + "_" + r(AN, 59), "GITHUB_PAT")
    # GitLab
    F("gitlab_pat", lambda: "glpat-" + r(URLB, 20), "GITLAB_TOKEN")
    F("gitlab_pipeline_trigger", lambda: "glptt-" + r(HEX, 40), "GITLAB_TRIGGER_TOKEN")
    F("gitlab_runner_auth", lambda: "glrt-" + r(URLB, 20), "RUNNER_TOKEN")
    F("gitlab_deploy_token", lambda: "gldt-" + r(URLB, 20), "GITLAB_DEPLOY_TOKEN")
    F("gitlab_feed_token", lambda: "glft-" + r(URLB, 20), "GITLAB_FEED_TOKEN")
    F("gitlab_oauth_app_secret", lambda: "gloas-" + r(HEX, 64), "GITLAB_OAUTH_SECRET")
    F("gitlab_scim_token", lambda: "glsoat-" + r(URLB, 20), "GITLAB_SCIM_TOKEN")
    F("gitlab_incoming_mail", lambda: "glimt-" + r(LO_AN, 25), "GITLAB_INCOMING_MAIL_TOKEN")
    F("gitlab_agent_token", lambda: "glagent-" + r(URLB, 50), "GITLAB_AGENT_TOKEN")
    F("gitlab_job_token", lambda: "glcbt-" + r(HEX, 2) + "_" + r(URLB, 20), "CI_JOB_TOKEN")
    # AWS
    F("aws_access_key_id", lambda: "AKIA" + r(UPP + "234567", 16), "AWS_ACCESS_KEY_ID")
    F("aws_temp_access_key_id", lambda: "ASIA" + r(UPP + "234567", 16), "AWS_ACCESS_KEY_ID")
    F("aws_secret_access_key", lambda: r(B64, 40), "AWS_SECRET_ACCESS_KEY", "random")
    F("aws_session_token", lambda: "IQoJb3JpZ2luX2VjE" + r(B64, 360) + "=", "AWS_SESSION_TOKEN", "random")
    F("amazon_mws", lambda: "amzn.mws." + uid(), "MWS_AUTH_TOKEN")
    F("amazon_lwa_client_secret", lambda: "amzn1.oa2-cs.v1." + r(HEX, 64), "LWA_CLIENT_SECRET")
    # Google
    F("google_api_key", lambda: "AIza" + r(URLB, 35), "GOOGLE_API_KEY")
    F("google_oauth_client_secret", lambda: "GOCSPX-" + r(URLB, 28), "GOOGLE_CLIENT_SECRET")
    F("google_oauth_access_token", lambda: "ya29." + r(URLB, 150), "GOOGLE_ACCESS_TOKEN")
    F("google_oauth_refresh_token", lambda: "1//0" + r(AN, 1) + r(URLB, 98), "GOOGLE_REFRESH_TOKEN")
    F("firebase_fcm_server_key", lambda: "AAAA" + r(URLB, 7) + ":APA91b" + r(URLB, 134), "FCM_SERVER_KEY")
    # Slack
    F("slack_bot_token", lambda: f"xoxb-{d(11)}-{d(13)}-{r(AN, 24)}", "SLACK_BOT_TOKEN")
    F("slack_user_token", lambda: f"xoxp-{d(11)}-{d(11)}-{d(13)}-{r(HEX, 32)}", "SLACK_USER_TOKEN")
    F("slack_app_token", lambda: f"xapp-1-A{r(UP_AN, 10)}-{d(13)}-{r(HEX, 64)}", "SLACK_APP_TOKEN")
    F("slack_config_access_token", lambda: "xoxe.xoxp-1-" + r(URLB, 150), "SLACK_CONFIG_TOKEN")
    F("slack_config_refresh_token", lambda: "xoxe-1-" + r(URLB, 140), "SLACK_CONFIG_REFRESH_TOKEN")
    F("slack_legacy_workspace_token", lambda: f"xoxa-2-{d(11)}-{d(12)}-{d(12)}-{r(HEX, 32)}", "SLACK_TOKEN")
    F("slack_webhook_url", _slack_webhook, "SLACK_WEBHOOK_URL", "url")
    # Payments
    F("stripe_secret_live", lambda: "sk_live_" + (r(AN, 24) if R.random() < 0.4 else "51" + r(AN, 97)),
      "STRIPE_SECRET_KEY")
    F("stripe_secret_test", lambda: "sk_test_" + (r(AN, 24) if R.random() < 0.4 else "51" + r(AN, 97)),
      "STRIPE_SECRET_KEY")
    F("stripe_restricted_live", lambda: "rk_live_" + "51" + r(AN, 97), "STRIPE_RESTRICTED_KEY")
    F("stripe_restricted_test", lambda: "rk_test_" + "51" + r(AN, 97), "STRIPE_RESTRICTED_KEY")
    F("stripe_webhook_secret", lambda: "whsec_" + r(AN, 32), "STRIPE_WEBHOOK_SECRET")
    F("square_access_token", lambda: "EAAA" + r(URLB, 60), "SQUARE_ACCESS_TOKEN")
    F("square_legacy_access", lambda: "sq0atp-" + r(URLB, 22), "SQUARE_ACCESS_TOKEN")
    F("square_oauth_secret", lambda: "sq0csp-" + r(URLB, 43), "SQUARE_OAUTH_SECRET")
    F("braintree_access_token", lambda: f"access_token$production${r(LO_AN, 16)}${r(HEX, 32)}",
      "BRAINTREE_ACCESS_TOKEN")
    F("paystack_secret", lambda: "sk_live_" + r(HEX, 40), "PAYSTACK_SECRET_KEY")
    F("razorpay_key", lambda: "rzp_live_" + r(AN, 14), "RAZORPAY_KEY_ID")
    F("flutterwave_secret", lambda: R.choice(["FLWSECK_TEST-", "FLWSECK-"]) + r(HEX, 32) + "-X",
      "FLW_SECRET_KEY")
    F("adyen_api_key", lambda: "AQE" + r(AN, 12) + "+" + r(AN + "+/", 150) + "=", "ADYEN_API_KEY")
    F("checkout_secret", lambda: "sk_sbox_" + r(LO_AN, 26), "CKO_SECRET_KEY")
    F("gocardless_token", lambda: "live_" + r(URLB, 40), "GOCARDLESS_ACCESS_TOKEN")
    F("shippo_token", lambda: "shippo_live_" + r(HEX, 40), "SHIPPO_API_TOKEN")
    F("easypost_key", lambda: "EZAK" + r(AN, 54), "EASYPOST_API_KEY")
    F("duffel_token", lambda: "duffel_live_" + r(URLB, 43), "DUFFEL_ACCESS_TOKEN")
    F("plaid_access_token", lambda: "access-production-" + uid(), "PLAID_ACCESS_TOKEN")
    # Messaging / email
    F("twilio_api_key", lambda: "SK" + r(HEX, 32), "TWILIO_API_KEY")
    F("twilio_auth_token", lambda: r(HEX, 32), "TWILIO_AUTH_TOKEN", "context")
    F("sendgrid_api_key", lambda: "SG." + r(URLB, 22) + "." + r(URLB, 43), "SENDGRID_API_KEY")
    F("mailgun_legacy_key", lambda: "key-" + r(HEX, 32), "MAILGUN_API_KEY")
    F("mailgun_private_key", lambda: f"{r(HEX, 32)}-{r(HEX, 8)}-{r(HEX, 8)}", "MAILGUN_API_KEY", "context")
    F("mailchimp_api_key", lambda: r(HEX, 32) + "-us" + str(R.randint(1, 21)), "MAILCHIMP_API_KEY")
    F("mailersend_token", lambda: "mlsn." + r(HEX, 64), "MAILERSEND_API_TOKEN")
    F("brevo_api_key", lambda: "xkeysib-" + r(HEX, 64) + "-" + r(AN, 16), "BREVO_API_KEY")
    F("postmark_server_token", uid, "POSTMARK_SERVER_TOKEN", "context")
    F("resend_api_key", lambda: "re_" + r(AN, 8) + "_" + r(AN, 24), "RESEND_API_KEY")
    F("telegram_bot_token", lambda: d(10) + ":AA" + r(URLB, 33), "TELEGRAM_BOT_TOKEN")
    F("discord_bot_token", lambda: R.choice("MN") + r(AN, 23) + "." + r(URLB, 6) + "." + r(URLB, 27),
      "DISCORD_BOT_TOKEN")
    F("discord_webhook_url", _discord_webhook, "DISCORD_WEBHOOK_URL", "url")
    F("teams_webhook_url", _teams_webhook, "TEAMS_WEBHOOK_URL", "url")
    F("zapier_webhook_url", _zapier_webhook, "ZAPIER_WEBHOOK_URL", "url")
    F("twitch_oauth", lambda: "oauth:" + r(LO_AN, 30), "TWITCH_OAUTH_TOKEN")
    F("intercom_token", lambda: "dG9rOj" + r(AN, 54) + "=", "INTERCOM_ACCESS_TOKEN")
    F("facebook_access_token", lambda: "EAAG" + r(AN, 190), "FACEBOOK_ACCESS_TOKEN")
    F("twitter_bearer_token", _twitter_bearer, "TWITTER_BEARER_TOKEN")
    # AI
    F("openai_legacy_key", lambda: "sk-" + r(AN, 20) + "T3BlbkFJ" + r(AN, 20), "OPENAI_API_KEY")
    F("openai_project_key", lambda: "sk-proj-" + r(URLB, 74) + "T3BlbkFJ" + r(URLB, 74), "OPENAI_API_KEY")
    F("openai_svcacct_key", lambda: "sk-svcacct-" + r(URLB, 74) + "T3BlbkFJ" + r(URLB, 74), "OPENAI_API_KEY")
    F("openai_admin_key", lambda: "sk-admin-" + r(URLB, 74) + "T3BlbkFJ" + r(URLB, 74), "OPENAI_ADMIN_KEY")
    F("anthropic_api_key", lambda: "sk-ant-api03-" + r(URLB, 93) + "AA", "ANTHROPIC_API_KEY")
    F("anthropic_admin_key", lambda: "sk-ant-admin01-" + r(URLB, 93) + "AA", "ANTHROPIC_ADMIN_KEY")
    F("huggingface_token", lambda: "hf_" + r(LET, 34), "HF_TOKEN")
    F("huggingface_org_token", lambda: "api_org_" + r(LET, 34), "HF_ORG_TOKEN")
    F("groq_api_key", lambda: "gsk_" + r(AN, 52), "GROQ_API_KEY")
    F("replicate_token", lambda: "r8_" + r(AN, 37), "REPLICATE_API_TOKEN")
    F("perplexity_key", lambda: "pplx-" + r(AN, 48), "PERPLEXITY_API_KEY")
    F("xai_key", lambda: "xai-" + r(AN, 80), "XAI_API_KEY")
    F("openrouter_key", lambda: "sk-or-v1-" + r(HEX, 64), "OPENROUTER_API_KEY")
    F("deepseek_key", lambda: "sk-" + r(HEX, 32), "DEEPSEEK_API_KEY")
    F("langsmith_key", lambda: R.choice(["lsv2_pt_", "lsv2_sk_"]) + r(HEX, 32) + "_" + r(HEX, 10),
      "LANGSMITH_API_KEY")
    F("pinecone_key", lambda: "pcsk_" + r(AN, 5) + "_" + r(AN, 63), "PINECONE_API_KEY")
    F("elevenlabs_key", lambda: "sk_" + r(HEX, 48), "ELEVENLABS_API_KEY")
    F("cerebras_key", lambda: "csk-" + r(LO_AN, 48), "CEREBRAS_API_KEY")
    F("fireworks_key", lambda: "fw_" + r(AN, 24), "FIREWORKS_API_KEY")
    F("voyage_key", lambda: "pa-" + r(URLB, 43), "VOYAGE_API_KEY")
    F("tavily_key", lambda: "tvly-" + R.choice(["", "dev-", "prod-"]) + r(AN, 32), "TAVILY_API_KEY")
    F("firecrawl_key", lambda: "fc-" + r(HEX, 32), "FIRECRAWL_API_KEY")
    F("e2b_key", lambda: "e2b_" + r(HEX, 40), "E2B_API_KEY")
    F("browserbase_key", lambda: "bb_live_" + r(URLB, 27), "BROWSERBASE_API_KEY")
    F("modal_token_secret", lambda: "as-" + r(AN, 22), "MODAL_TOKEN_SECRET")
    F("cohere_key", lambda: r(AN, 40), "COHERE_API_KEY", "random")
    F("mistral_key", lambda: r(AN, 32), "MISTRAL_API_KEY", "random")
    F("wandb_key", lambda: r(HEX, 40), "WANDB_API_KEY", "context")
    F("together_key", lambda: r(HEX, 64), "TOGETHER_API_KEY", "context")
    F("azure_openai_key", lambda: r(HEX, 32), "AZURE_OPENAI_API_KEY", "context")
    F("assemblyai_key", lambda: r(HEX, 32), "ASSEMBLYAI_API_KEY", "context")
    F("deepgram_key", lambda: r(HEX, 40), "DEEPGRAM_API_KEY", "context")
    # Package registries / CI
    F("npm_token", lambda: gh("npm_"), "NPM_TOKEN")
    F("pypi_token", lambda: "pypi-AgEIcHlwaS5vcmcCJ" + r(URLB, 150), "PYPI_TOKEN")
    F("testpypi_token", lambda: "pypi-AgENdGVzdC5weXBpLm9yZwIk" + r(URLB, 150), "TEST_PYPI_TOKEN")
    F("rubygems_key", lambda: "rubygems_" + r(HEX, 48), "GEM_HOST_API_KEY")
    F("nuget_key", lambda: "oy2" + r(LO_AN, 43), "NUGET_API_KEY")
    F("clojars_token", lambda: "CLOJARS_" + r(LO_AN, 60), "CLOJARS_TOKEN")
    F("dockerhub_pat", lambda: "dckr_pat_" + r(URLB, 27), "DOCKERHUB_TOKEN")
    F("dockerhub_oat", lambda: "dckr_oat_" + r(URLB, 32), "DOCKERHUB_ORG_TOKEN")
    F("jfrog_api_key", lambda: "AKCp" + r(AN, 69), "ARTIFACTORY_API_KEY")
    F("jfrog_reference_token", lambda: "cmVmdGtuOjAxOjE3" + r(AN, 48), "JFROG_ACCESS_TOKEN")
    F("circleci_pat", lambda: "CCIPAT_" + r(AN, 22) + "_" + r(HEX, 40), "CIRCLECI_TOKEN")
    F("buildkite_token", lambda: "bkua_" + r(HEX, 40), "BUILDKITE_API_TOKEN")
    F("sonarqube_token", lambda: R.choice(["squ_", "sqp_", "sqa_"]) + r(HEX, 40), "SONAR_TOKEN")
    F("sourcegraph_token", lambda: "sgp_" + r(HEX, 16) + "_" + r(HEX, 40), "SRC_ACCESS_TOKEN")
    F("octopus_api_key", lambda: "API-" + r(UP_AN, 26), "OCTOPUS_API_KEY")
    F("harness_pat", lambda: "pat." + r(URLB, 22) + "." + r(HEX, 24) + "." + r(AN, 20), "HARNESS_API_KEY")
    F("infracost_key", lambda: "ico-" + r(AN, 32), "INFRACOST_API_KEY")
    F("snyk_token", uid, "SNYK_TOKEN", "context")
    F("codecov_token", uid, "CODECOV_TOKEN", "context")
    F("readme_key", lambda: "rdme_" + r(LO_AN, 70), "README_API_KEY")
    F("postman_key", lambda: "PMAK-" + r(HEX, 24) + "-" + r(HEX, 34), "POSTMAN_API_KEY")
    # Cloud / hosting
    F("azure_storage_account_key", lambda: r(B64, 86) + "==", "AZURE_STORAGE_KEY", "random")
    F("azure_ad_client_secret", _azure_client_secret, "AZURE_CLIENT_SECRET")
    F("azure_sas_url", _sas_url, "AZURE_SAS_URL", "url")
    F("azure_servicebus_key", lambda: r(B64, 43) + "=", "SERVICEBUS_SHARED_ACCESS_KEY", "random")
    F("azure_devops_pat_legacy", lambda: r(B32LO, 52), "AZURE_DEVOPS_PAT", "random")
    F("azure_devops_pat", lambda: r(AN, 76) + "AZDO" + r(AN, 4), "AZURE_DEVOPS_PAT", "random")
    F("digitalocean_pat", lambda: "dop_v1_" + r(HEX, 64), "DIGITALOCEAN_TOKEN")
    F("digitalocean_oauth", lambda: "doo_v1_" + r(HEX, 64), "DO_OAUTH_TOKEN")
    F("digitalocean_refresh", lambda: "dor_v1_" + r(HEX, 64), "DO_REFRESH_TOKEN")
    F("heroku_api_key", lambda: "HRKU-AA" + r(URLB, 58), "HEROKU_API_KEY")
    F("heroku_legacy_key", uid, "HEROKU_API_KEY", "context")
    F("databricks_token", lambda: "dapi" + r(HEX, 32), "DATABRICKS_TOKEN")
    F("alibaba_access_key", lambda: "LTAI" + r(AN, 20), "ALIBABA_CLOUD_ACCESS_KEY_ID")
    F("tencent_secret_id", lambda: "AKID" + r(AN, 32), "TENCENTCLOUD_SECRET_ID")
    F("yandex_api_key", lambda: "AQVN" + r(URLB, 36), "YC_API_KEY")
    F("yandex_iam_token", lambda: "t1.9euelZ" + r(URLB, 150), "YC_IAM_TOKEN")
    F("yandex_oauth_token", lambda: "y0_AgAAAA" + r(URLB, 50), "YC_OAUTH_TOKEN")
    F("scaleway_access_key", lambda: "SCW" + r(UP_AN, 17), "SCW_ACCESS_KEY")
    F("cloudflare_api_token", lambda: r(URLB, 40), "CLOUDFLARE_API_TOKEN", "random")
    F("cloudflare_global_key", lambda: r(HEX, 37), "CLOUDFLARE_API_KEY", "context")
    F("cloudflare_origin_ca_key", lambda: "v1.0-" + r(HEX, 24) + "-" + r(HEX, 146), "CF_ORIGIN_CA_KEY")
    F("linode_token", lambda: r(HEX, 64), "LINODE_TOKEN", "context")
    F("vultr_api_key", lambda: r(UP_AN, 36), "VULTR_API_KEY", "random")
    F("fastly_token", lambda: r(URLB, 32), "FASTLY_API_TOKEN", "random")
    F("vercel_token", lambda: r(AN, 24), "VERCEL_TOKEN", "random")
    F("netlify_pat", lambda: "nfp_" + r(AN, 36), "NETLIFY_AUTH_TOKEN")
    F("flyio_token", lambda: "fo1_" + r(URLB, 43), "FLY_API_TOKEN")
    F("render_api_key", lambda: "rnd_" + r(AN, 32), "RENDER_API_KEY")
    F("supabase_pat", lambda: "sbp_" + r(HEX, 40), "SUPABASE_ACCESS_TOKEN")
    F("supabase_secret_key", lambda: "sb_secret_" + r(URLB, 31), "SUPABASE_SECRET_KEY")
    F("supabase_service_role_jwt", lambda: jwt({"iss": "supabase", "ref": r(LOW, 20), "role": "service_role",
                                                 "iat": R.randint(1.6e9, 1.7e9), "exp": R.randint(1.9e9, 2e9)}),
      "SUPABASE_SERVICE_ROLE_KEY")
    F("planetscale_token", lambda: "pscale_tkn_" + r(URLB, 43), "PLANETSCALE_SERVICE_TOKEN")
    F("planetscale_password", lambda: "pscale_pw_" + r(URLB, 43), "DATABASE_PASSWORD")
    F("neon_api_key", lambda: "napi_" + r(LO_AN, 64), "NEON_API_KEY")
    F("pulumi_token", lambda: "pul-" + r(HEX, 40), "PULUMI_ACCESS_TOKEN")
    F("terraform_cloud_token", lambda: r(AN, 14) + ".atlasv1." + r(URLB, 67), "TFE_TOKEN")
    F("vault_service_token", lambda: "hvs.CAESI" + r(URLB, 86), "VAULT_TOKEN")
    F("vault_batch_token", lambda: "hvb.AAAAAQ" + r(URLB, 120), "VAULT_TOKEN")
    F("vault_legacy_token", lambda: "s." + r(AN, 24), "VAULT_TOKEN", "random")
    F("doppler_personal_token", lambda: "dp.pt." + r(AN, 43), "DOPPLER_TOKEN")
    F("doppler_service_token", lambda: "dp.st.prd." + r(AN, 40), "DOPPLER_TOKEN")
    F("tailscale_auth_key", lambda: f"tskey-auth-k{r(AN, 11)}CNTRL-{r(AN, 32)}", "TS_AUTHKEY")
    F("tailscale_api_key", lambda: f"tskey-api-k{r(AN, 11)}CNTRL-{r(AN, 32)}", "TS_API_KEY")
    F("ngrok_authtoken", lambda: "2" + r(AN, 26) + "_" + r(AN, 21), "NGROK_AUTHTOKEN", "random")
    F("okta_api_token", lambda: "00" + r(URLB, 40), "OKTA_API_TOKEN", "random")
    F("onepassword_service_account", lambda: "ops_eyJzaWduSW5BZGRyZXNzIjoi" + r(AN, 300), "OP_SERVICE_ACCOUNT_TOKEN")
    F("onepassword_secret_key", lambda: "A3-" + "-".join(r(UP_AN, n) for n in (6, 6, 5, 5, 5, 5)),
      "OP_SECRET_KEY")
    F("age_secret_key", lambda: "AGE-SECRET-KEY-1" + r(BECH32, 58), "SOPS_AGE_KEY")
    # SaaS
    F("atlassian_api_token", lambda: "ATATT3xFfGF0" + r(URLB, 170) + "=" + r(HEX.upper(), 8), "JIRA_API_TOKEN")
    F("atlassian_legacy_token", lambda: r(AN, 24), "CONFLUENCE_API_TOKEN", "random")
    F("bitbucket_app_password", lambda: "ATBB" + r(AN, 28) + r(HEX.upper(), 8), "BITBUCKET_APP_PASSWORD")
    F("linear_api_key", lambda: "lin_api_" + r(AN, 40), "LINEAR_API_KEY")
    F("notion_legacy_token", lambda: "secret_" + r(AN, 43), "NOTION_TOKEN")
    F("notion_token", lambda: "ntn_" + d(11) + r(AN, 35), "NOTION_TOKEN")
    F("airtable_pat", lambda: "pat" + r(AN, 14) + "." + r(HEX, 64), "AIRTABLE_TOKEN")
    F("asana_pat", lambda: f"2/{d(16)}/{d(16)}:{r(HEX, 32)}", "ASANA_ACCESS_TOKEN")
    F("figma_pat", lambda: "figd_" + r(URLB, 40), "FIGMA_TOKEN")
    F("clickup_token", lambda: f"pk_{d(8)}_{r(UP_AN, 32)}", "CLICKUP_API_TOKEN")
    F("trello_token", lambda: "ATTA" + r(HEX, 64) + r(HEX.upper(), 8), "TRELLO_TOKEN")
    F("hubspot_pat", lambda: "pat-na1-" + uid(), "HUBSPOT_ACCESS_TOKEN")
    F("klaviyo_private_key", lambda: "pk_" + r(HEX, 34), "KLAVIYO_PRIVATE_KEY")
    F("contentful_pat", lambda: "CFPAT-" + r(URLB, 43), "CONTENTFUL_MANAGEMENT_TOKEN")
    F("frameio_token", lambda: "fio-u-" + r(URLB, 64), "FRAMEIO_TOKEN")
    F("adafruit_io_key", lambda: "aio_" + r(AN, 28), "ADAFRUIT_IO_KEY")
    F("dynatrace_token", lambda: "dt0c01." + r(UP_AN, 24) + "." + r(UP_AN, 64), "DT_API_TOKEN")
    F("grafana_service_account", lambda: "glsa_" + r(AN, 32) + "_" + r(HEX, 8), "GRAFANA_TOKEN")
    F("grafana_cloud_token", lambda: "glc_eyJvIjoi" + r(AN, 120) + "fQ==", "GRAFANA_CLOUD_TOKEN")
    F("newrelic_user_key", lambda: "NRAK-" + r(UP_AN, 27), "NEW_RELIC_API_KEY")
    F("newrelic_insert_key", lambda: "NRII-" + r(URLB, 32), "NEW_RELIC_INSERT_KEY")
    F("newrelic_browser_key", lambda: "NRJS-" + r(HEX, 19), "NEW_RELIC_BROWSER_KEY")
    F("sentry_org_token", lambda: "sntrys_eyJpYXQiOjE3" + r(URLB, 120) + "_" + r(URLB, 43), "SENTRY_AUTH_TOKEN")
    F("sentry_user_token", lambda: "sntryu_" + r(HEX, 64), "SENTRY_AUTH_TOKEN")
    F("datadog_api_key", lambda: r(HEX, 32), "DD_API_KEY", "context")
    F("datadog_app_key", lambda: r(HEX, 40), "DD_APP_KEY", "context")
    F("algolia_admin_key", lambda: r(HEX, 32), "ALGOLIA_ADMIN_KEY", "context")
    F("launchdarkly_api_token", lambda: "api-" + uid(), "LD_API_KEY")
    F("launchdarkly_sdk_key", lambda: "sdk-" + uid(), "LD_SDK_KEY")
    F("prefect_key", lambda: "pnu_" + r(AN, 36), "PREFECT_API_KEY")
    F("scalingo_token", lambda: "tk-us-" + r(URLB, 48), "SCALINGO_API_TOKEN")
    F("typeform_token", lambda: "tfp_" + r(AN, 44) + "_" + r(AN, 14), "TYPEFORM_TOKEN")
    F("mapbox_secret_token", lambda: "sk.eyJ1IjoiZGV2b3BzIiwiYSI6I" + r(AN, 24) + "In0." + r(URLB, 22),
      "MAPBOX_SECRET_TOKEN")
    F("salesforce_access_token", lambda: "00D" + r(AN, 12) + "!" + r(AN + "._", 96), "SF_ACCESS_TOKEN")
    F("confluent_api_secret", lambda: r(B64, 64), "CONFLUENT_API_SECRET", "random")
    F("sumologic_access_key", lambda: r(AN, 64), "SUMO_ACCESS_KEY", "random")
    F("zendesk_token", lambda: r(AN, 40), "ZENDESK_API_TOKEN", "random")
    F("pagerduty_token", lambda: "u+" + r(URLB, 18), "PAGERDUTY_TOKEN")
    # Framework secrets
    F("django_insecure_secret_key", lambda: "django-insecure-" + r(LO_AN + "!@$%^&*(-_=+)", 50), "SECRET_KEY")
    F("rails_secret_key_base", lambda: r(HEX, 128), "SECRET_KEY_BASE", "context")
    F("flask_secret_key", lambda: r(HEX, 64), "FLASK_SECRET_KEY", "context")
    F("laravel_app_key", lambda: "base64:" + base64.b64encode(R.randbytes(32)).decode(), "APP_KEY")
    F("jwt_access_token", lambda: jwt({"sub": str(R.randint(10**5, 10**7)), "name": R.choice(["Ana", "Raj", "Kim"]),
                                       "scope": "read write", "iat": R.randint(1.6e9, 1.7e9)}), "ACCESS_TOKEN")
    F("k8s_secret_data_base64", _k8s_data, "DB_PASSWORD", "context")


# --------------------------------------------------------------------------------------------------------------
# Context templates. {K}=UPPER_ENV, {k}=snake, {c}=camelCase, {V}=value.
# --------------------------------------------------------------------------------------------------------------

TOKEN_TEMPLATES = [
    ("py_assign", '{k} = "{V}"'),
    ("py_environ", 'os.environ["{K}"] = "{V}"'),
    ("py_kwarg", 'client = Client({k}="{V}", timeout=30)'),
    ("py_dict", 'settings = {"{k}": "{V}", "debug": False}'),
    ("js_const", 'const {c} = "{V}";'),
    ("js_object", "const config = { {c}: '{V}', region: 'us-east-1' };"),
    ("js_process_env", 'process.env.{K} = "{V}";'),
    ("ts_template", "export const {c}: string = `{V}`;"),
    ("go_short", '{c} := "{V}"'),
    ("go_header", 'req.Header.Set("Authorization", "Bearer {V}")'),
    ("java_final", 'private static final String {K} = "{V}";'),
    ("java_prop", 'props.setProperty("{k}", "{V}");'),
    ("csharp_var", 'var {c} = "{V}";'),
    ("kotlin_val", 'val {c} = "{V}"'),
    ("rust_let", 'let {k} = "{V}";'),
    ("swift_let", 'let {c} = "{V}"'),
    ("php_var", "${c} = '{V}';"),
    ("php_define", "define('{K}', '{V}');"),
    ("php_array", "    '{k}' => '{V}',"),
    ("ruby_assign", "{k} = '{V}'"),
    ("ruby_config", 'config.{k} = "{V}"'),
    ("ruby_hash", '{ {k}: "{V}" }'),
    ("sh_export", "export {K}={V}"),
    ("sh_export_quoted", 'export {K}="{V}"'),
    ("sh_inline_env", "{K}='{V}' ./deploy.sh --env prod"),
    ("powershell", '$env:{K} = "{V}"'),
    ("makefile", "{K} := {V}"),
    ("makefile_q", "{K} ?= {V}"),
    ("dotenv", "{K}={V}"),
    ("dotenv_quoted", '{K}="{V}"'),
    ("ini", "{k} = {V}"),
    ("toml", '{k} = "{V}"'),
    ("yaml", "{k}: {V}"),
    ("yaml_quoted", '{k}: "{V}"'),
    ("yaml_nested", "credentials:\n  {k}: {V}\n  region: eu-west-1"),
    ("json", '{"{k}": "{V}"}'),
    ("json_camel", '{"{c}":"{V}","timeout":30}'),
    ("xml_element", "<{c}>{V}</{c}>"),
    ("xml_appsetting", '<add key="{K}" value="{V}" />'),
    ("hcl", '  {k} = "{V}"'),
    ("dockerfile_env", "ENV {K}={V}"),
    ("dockerfile_env_space", "ENV {K} {V}"),
    ("dockerfile_arg", "ARG {K}={V}"),
    ("k8s_secret", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-secrets\ntype: Opaque\nstringData:\n"
                   "  {K}: {V}"),
    ("k8s_env", "env:\n  - name: {K}\n    value: \"{V}\""),
    ("gha_env", "    env:\n      {K}: {V}"),
    ("curl_bearer", "curl -H 'Authorization: Bearer {V}' https://api.example.com/v1/me"),
    ("curl_api_key", 'curl -s -H "X-Api-Key: {V}" https://api.example.com/items'),
    ("http_bearer", "Authorization: Bearer {V}"),
    ("http_token", "Authorization: token {V}"),
    ("cli_token", "mytool login --token {V}"),
    ("cli_api_key_eq", "deploy --api-key={V} --region us-east-1"),
    ("url_token_query", "https://api.example.com/v2/export?token={V}&format=csv"),
    ("url_api_key_query", "GET /v1/search?q=shoes&api_key={V} HTTP/1.1"),
    ("git_url_userinfo", "git clone https://oauth2:{V}@gitlab.example.com/group/project.git"),
    ("npmrc", "//registry.npmjs.org/:_authToken={V}"),
]

# extra templates for specific families
EXTRA_TEMPLATES = {
    "azure_storage_account_key": [("azure_conn_string", "DefaultEndpointsProtocol=https;AccountName=prodstore;"
                                   "AccountKey={V};EndpointSuffix=core.windows.net")],
    "azure_servicebus_key": [("servicebus_conn", "Endpoint=sb://orders-ns.servicebus.windows.net/;"
                              "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey={V}")],
    "okta_api_token": [("okta_ssws", "Authorization: SSWS {V}")],
    "aws_secret_access_key": [("aws_credentials_file", "[default]\naws_access_key_id = AKIA" + "Q3EGRT7HXMZPLN2W"
                               + "\naws_secret_access_key = {V}"),
                              ("aws_cli_configure", "aws configure set aws_secret_access_key {V}")],
    "k8s_secret_data_base64": [("k8s_secret_data", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n"
                                "type: Opaque\ndata:\n  password: {V}")],
    "github_pat_classic": [("git_url_token_user", "https://{V}@github.com/acme/infra.git"),
                           ("gh_auth_stdin", "echo {V} | gh auth login --with-token")],
    "npm_token": [("npm_config", "npm config set //registry.npmjs.org/:_authToken {V}")],
    "pypi_token": [("pypirc", "[pypi]\nusername = __token__\npassword = {V}"),
                   ("twine", "twine upload -u __token__ -p {V} dist/*")],
    "dockerhub_pat": [("docker_login", "docker login -u ci-bot -p {V}")],
    "telegram_bot_token": [("telegram_url", "https://api.telegram.org/bot{V}/sendMessage?chat_id=1234")],
}

URL_TEMPLATES = [
    ("py_assign", '{k} = "{V}"'),
    ("dotenv", "{K}={V}"),
    ("yaml", "{k}: {V}"),
    ("json", '{"{k}": "{V}"}'),
    ("sh_export", "export {K}={V}"),
    ("curl_post", "curl -X POST -H 'Content-type: application/json' --data '{\"text\":\"hi\"}' {V}"),
    ("js_fetch", "await fetch('{V}', { method: 'POST', body });"),
    ("markdown", "Webhook: <{V}>"),
    ("toml", '{k} = "{V}"'),
    ("dockerfile_env", "ENV {K}={V}"),
]

PEM_TEMPLATES = [
    ("raw_block", "{V}"),
    ("file_dump", "$ cat ~/.ssh/deploy_key\n{V}\n$"),
    ("json_escaped", '{"type": "service_account", "project_id": "acme-prod", "private_key_id": "'
                     + "PKID" + '", "private_key": "{VJ}", "client_email": "ci@acme-prod.iam.gserviceaccount.com"}'),
    ("env_escaped", 'PRIVATE_KEY="{VJ}"'),
    ("yaml_block", "tls:\n  key: |\n{VI}"),
    ("python_triple", 'PRIVATE_KEY = """{V}"""'),
    ("terraform_heredoc", 'private_key = <<EOT\n{V}\nEOT'),
]

PASSWORD_KEYS = ["password", "passwd", "pwd", "secret", "api_key", "client_secret", "db_password",
                 "mysql_root_password", "auth_token", "access_token", "secret_key", "pass", "smtp_password",
                 "admin_pass", "privateKey"]

PASSWORD_ONLY_TEMPLATES = [
    ("cli_password", "pg_dump --username app --password {V} prod > dump.sql"),
    ("cli_password_eq", "redis-cli --pass={V} -h cache.internal"),
    ("mysql_p", "mysql -u root -p{V} appdb"),
    ("mysql_password_eq", "mysql --user=root --password={V} appdb"),
    ("sshpass", "sshpass -p '{V}' ssh root@10.0.4.17"),
    ("docker_login", "docker login -u ci -p {V} registry.example.com"),
    ("postgres_url", "DATABASE_URL=postgres://app:{V}@db.internal:5432/prod"),
    ("postgres_url_bare", "connect to postgresql://admin:{V}@10.1.2.3/analytics"),
    ("mongodb_srv", "mongodb+srv://admin:{V}@cluster0.ab1cd.mongodb.net/test?retryWrites=true"),
    ("redis_url", "redis://:{V}@cache.internal:6379/0"),
    ("amqp_url", "amqp://orders:{V}@rabbit.internal:5672/vhost"),
    ("mysql_url", "jdbc:mysql://db:3306/app?user=app&password={V}&useSSL=true"),
    ("https_userinfo", "https://deploy:{V}@git.example.com/org/repo.git"),
    ("ftp_url", "ftp://backup:{V}@ftp.example.com/nightly/"),
    ("ado_conn", "Server=tcp:sql.example.net,1433;Database=app;User ID=sa;Password={V};Encrypt=true;"),
    ("sql_create_user", "CREATE USER app WITH PASSWORD '{V}';"),
    ("sql_identified", "ALTER USER 'app'@'%' IDENTIFIED BY '{V}';"),
    ("htaccess_basic", "curl -u admin:{V} https://jenkins.internal/api/json"),
    ("pypirc_password", "[pypi]\nusername = alice\npassword = {V}"),
    ("netrc", "machine api.example.com login alice password {V}"),
    ("docker_compose", "    environment:\n      - POSTGRES_PASSWORD={V}"),
    ("ansible_vars", "ansible_become_password: {V}"),
    ("spring_props", "spring.datasource.password={V}"),
    ("wpa", 'network={\n    ssid="HomeNet"\n    psk="{V}"\n}'),
]

BARE_SENTENCES = [
    "use {V} for the deploy",
    "my key is {V}",
    "here: {V}",
    "{V}",
    "can you check why {V} returns 401?",
    "I rotated it, new one is {V} - update the CI please",
    "token for staging -> {V}",
    "ok try this one: `{V}`",
    "(the old one was {V}, revoked now)",
    "Paste this into the settings page:\n{V}\nthen hit save.",
]

BARE_PASSWORD_SENTENCES = [
    "my password is {V}",
    "the root password is {V} btw",
    "db pass: {V}",
    "wifi password {V} - don't share it",
    "Login: admin / {V}",
    "new password for the vpn is {V}, old one expired",
]


def case_forms(env: str) -> dict[str, str]:
    parts = env.lower().split("_")
    camel = parts[0] + "".join(p.capitalize() for p in parts[1:])
    return {"{K}": env, "{k}": env.lower(), "{c}": camel}


def fill(template: str, forms: dict[str, str], value: str) -> str:
    out = template
    for key, val in forms.items():
        out = out.replace(key, val)
    return out.replace("{V}", value)


def credential_samples() -> list[dict]:
    samples = []
    for name, gen, env, kind in FAMILIES:
        forms = case_forms(env)
        templates = URL_TEMPLATES if kind == "url" else TOKEN_TEMPLATES + EXTRA_TEMPLATES.get(name, [])
        if name == "k8s_secret_data_base64":
            templates = EXTRA_TEMPLATES[name]
        for tname, template in templates:
            out = gen()
            value, secrets = (out if isinstance(out, tuple) else (out, [out]))
            if tname == "git_url_userinfo" and any(ch in value for ch in "/:@?#"):
                continue  # not a valid URL userinfo; a real one would be percent-encoded
            samples.append({"family": name, "placement": "context", "template": tname,
                            "text": fill(template, forms, value), "secrets": secrets})
        if kind in ("prefixed", "random", "url"):
            placement = "bare_random" if kind == "random" else "bare"
            for sentence in BARE_SENTENCES:
                out = gen()
                value, secrets = (out if isinstance(out, tuple) else (out, [out]))
                samples.append({"family": name, "placement": placement, "template": sentence[:24],
                                "text": sentence.replace("{V}", value), "secrets": secrets})
    # generic password-style secrets assigned to keys
    styles = [("generic_password_random", password_random), ("generic_password_wordy", password_wordy),
              ("generic_passphrase", passphrase)]
    for style, gen in styles:
        for key in PASSWORD_KEYS:
            env = key.upper() if key != "privateKey" else "PRIVATE_KEY"
            forms = case_forms(env)
            for tname, template in TOKEN_TEMPLATES:
                if tname in ("curl_bearer", "http_bearer", "http_token", "go_header", "git_url_userinfo", "npmrc",
                             "curl_api_key", "cli_token", "cli_api_key_eq", "url_token_query",
                             "url_api_key_query"):
                    continue
                value = gen()
                samples.append({"family": f"{style}", "placement": "context", "template": f"{tname}:{key}",
                                "text": fill(template, forms, value), "secrets": [value]})
        for tname, template in PASSWORD_ONLY_TEMPLATES:
            value = gen()
            samples.append({"family": f"{style}", "placement": "context", "template": tname,
                            "text": template.replace("{V}", value), "secrets": [value]})
        for sentence in BARE_PASSWORD_SENTENCES:
            value = gen()
            samples.append({"family": f"{style}", "placement": "bare_keyword", "template": sentence[:24],
                            "text": sentence.replace("{V}", value), "secrets": [value]})
    # HTTP basic auth header
    for tname, template in [("http_basic", "Authorization: Basic {V}"),
                            ("curl_basic", "curl -H 'Authorization: Basic {V}' https://api.example.com/"),
                            ("py_basic", 'headers = {"Authorization": "Basic {V}"}')]:
        creds = base64.b64encode(f"svc-deploy:{password_random()}".encode()).decode()
        samples.append({"family": "http_basic_auth", "placement": "context", "template": tname,
                        "text": template.replace("{V}", creds), "secrets": [creds]})
    # PEM private keys
    for kind in ["RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY",
                 "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK"]:
        family = "pem_" + kind.lower().replace(" ", "_")
        for tname, template in PEM_TEMPLATES:
            block, lines = _pem(kind)
            text = (template.replace("{VJ}", block.replace("\n", "\\n"))
                    .replace("{VI}", "\n".join("    " + ln for ln in block.split("\n"))).replace("{V}", block))
            samples.append({"family": family, "placement": "context", "template": tname, "text": text,
                            "secrets": lines})
        for sentence in ["here's the deploy key:\n{V}", "{V}", "can you check this key? {V} it fails on load"]:
            block, lines = _pem(kind)
            samples.append({"family": family, "placement": "bare", "template": sentence[:24],
                            "text": sentence.replace("{V}", block), "secrets": lines})
    return samples


# --------------------------------------------------------------------------------------------------------------
# False-positive corpus
# --------------------------------------------------------------------------------------------------------------

def fp_corpus() -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []

    def add(cat: str, *items: str) -> None:
        lines.extend((cat, item) for item in items)

    add("placeholder",
        'api_key = "xxxxxxxxxxxxxxxxxxxxxxxx"',
        "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "export GH_TOKEN=ghp_************************************",
        "OPENAI_API_KEY=sk-...",
        'OPENAI_API_KEY="sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"',
        "ANTHROPIC_API_KEY=sk-ant-api03-...",
        "ANTHROPIC_API_KEY=sk-ant-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        '"apiKey": "<your-api-key>"',
        "export STRIPE_SECRET_KEY=<YOUR_STRIPE_SECRET_KEY>",
        "STRIPE_SECRET_KEY=sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
        "STRIPE_SECRET_KEY=sk_test_XXXXXXXXXXXXXXXXXXXXXXXX",
        "token: ${GITHUB_TOKEN}",
        "password: ${DB_PASSWORD}",
        "password: ${DB_PASSWORD:-}",
        "password: {{ .Values.db.password }}",
        'password: "{{ secret }}"',
        "api_key: '{{ vault_api_key }}'",
        'client_secret = "****"',
        "password=********",
        "API_KEY=your_api_key_here",
        "API_KEY=YOUR_API_KEY",
        "API_KEY=<API_KEY>",
        'password = "<password>"',
        "aws_secret_access_key = <secret>",
        'token = "TOKEN"',
        "api_key: REPLACE_ME",
        "AUTH_TOKEN=[redacted]",
        'password: "[REDACTED]"',
        "SLACK_BOT_TOKEN=xoxb-your-token",
        "SLACK_BOT_TOKEN=xoxb-XXXXXXXXXXXX-XXXXXXXXXXXXX-XXXXXXXXXXXXXXXXXXXXXXXX",
        '"key": "INSERT_KEY_HERE"',
        "DB_PASSWORD=%DB_PASSWORD%",
        "password = $(cat /run/secrets/db_password)",
        "token=$TOKEN",
        "Authorization: Bearer <token>",
        "Authorization: Bearer $ACCESS_TOKEN",
        'curl -H "Authorization: Bearer ${API_TOKEN}" https://api.example.com/v1/me',
        'curl -H "Authorization: token $GITHUB_TOKEN" https://api.github.com/user',
        'pg_dump --username app --password "$DB_PASS" prod',
        "mysql -u root -p appdb",
        "mysql -u root -p$MYSQL_ROOT_PASSWORD appdb",
        "postgres://user:password@localhost:5432/mydb",
        "postgres://USER:PASSWORD@HOST:5432/DBNAME",
        "mongodb+srv://<username>:<password>@cluster0.mongodb.net/",
        "https://x-access-token:${GITHUB_TOKEN}@github.com/acme/infra.git",
        "secret: !vault |",
        "password: !Ref DbPassword",
        "  password = var.db_password",
        "  value = aws_secretsmanager_secret_version.db.secret_string",
        "        secretKeyRef:\n          name: db-credentials\n          key: password",
        "GOOGLE_API_KEY=AIzaXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "AWS_ACCESS_KEY_ID=AKIAXXXXXXXXXXXXXXXX",
        "GITLAB_TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx",
        "NPM_TOKEN=npm_<token>",
        "Authorization: Bearer sk-your-key-here",
        "twilio_auth_token = 'your_auth_token'",
        "SENDGRID_API_KEY=SG.xxxxxxxxxxxxxxxxxxxxxx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        'DATABRICKS_TOKEN="dapi<your-token>"',
        "password: ''",
        'password = ""',
        "password = None",
        "api_key: null",
        "SECRET_KEY=",
        "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN PRIVATE KEY-----\n<your private key here>\n-----END PRIVATE KEY-----",
        "token: <REDACTED>",
        "api_key = os.environ.get('API_KEY', 'dummy')",
        "password: example",
        "password: test",
        "PASSWORD=password",
        )
    add("doc_example",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws configure set aws_access_key_id AKIAI44QH8DHBEXAMPLE",
        "AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        "stripe.api_key = 'sk_test_4eC39HqLyjWDarjtT1zdp7dc'",
        "curl https://api.stripe.com/v1/charges -u sk_test_4eC39HqLyjWDarjtT1zdp7dc:",
        "SLACK_TOKEN=xoxb-not-a-real-token-this-will-not-work",
        "TWILIO_ACCOUNT_SID=ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT"
        "50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
        "AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true",
        )
    add("env_ref",
        'api_key = os.environ["OPENAI_API_KEY"]',
        'token = os.getenv("GITHUB_TOKEN")',
        "const key = process.env.STRIPE_SECRET_KEY;",
        'String pw = System.getenv("DB_PASSWORD");',
        "secret = ENV['AWS_SECRET_ACCESS_KEY']",
        "my $pw = $ENV{DB_PASSWORD};",
        "$key = getenv('MAILGUN_API_KEY');",
        'let token = std::env::var("SLACK_BOT_TOKEN")?;',
        "          NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
        "      password: ${{ secrets.DOCKERHUB_TOKEN }}",
        "TOKEN := $(shell cat .token)",
        "  - script: echo $(System.AccessToken)",
        "set API_KEY=%API_KEY%",
        "'api_key' => env('SENDGRID_API_KEY'),",
        'const token = Deno.env.get("GITHUB_TOKEN");',
        "const apiKey = import.meta.env.VITE_API_KEY;",
        'password: "{env:DB_PASSWORD}"',
        "export AWS_SECRET_ACCESS_KEY=$(aws configure get aws_secret_access_key)",
        'password = config("DB_PASSWORD", default="")',
        "token = settings.SLACK_TOKEN",
        "client_secret = vault.read('secret/data/oauth')['client_secret']",
        )
    add("code",
        "password = get_password(user)",
        'token = jwt.encode(payload, key, algorithm="HS256")',
        "secret = secrets.token_urlsafe(32)",
        'api_key = request.headers["X-Api-Key"]',
        "if password == confirm_password:",
        "self.password_hash = generate_password_hash(password)",
        "const token = await getAccessToken();",
        "  password: string;",
        "password = models.CharField(max_length=128)",
        "def check_secret(secret: str) -> bool:",
        "SECRET_KEY_LENGTH = 64",
        'token_type = "Bearer"',
        'api_key_header = APIKeyHeader(name="X-API-Key")',
        "PASSWORD_MIN_LENGTH = 12",
        '"password": forms.PasswordInput(),',
        "auth = (user, getpass.getpass())",
        "String hashed = passwordEncoder.encode(rawPassword);",
        "$hash = password_hash($password, PASSWORD_DEFAULT);",
        "password_reset_token = PasswordResetTokenGenerator()",
        "access_token = response.json()['access_token']",
        "let secret = try keychain.get(\"apiSecret\")",
        "func (c *Client) SetToken(token string) { c.token = token }",
        "AbstractSingletonProxyFactoryBean",
        "InternalFrameInternalFrameTitlePaneInternalFrameTitlePaneMaximizeButtonWindowNotFocusedState",
        "user = repo.getUserAccountSettingsByOrganizationIdentifier(orgId)",
        "def test_redact_credential_text_preserves_placeholders_in_yaml_files():",
        "ThisIsAVeryLongCamelCaseIdentifierUsedForTestingPurposesOnly",
        "kubectl create secret generic db-pass --from-literal=password=$(openssl rand -base64 32)",
        "openssl genrsa -out private.key 2048",
        "ssh-keygen -t ed25519 -C 'alice@laptop' -f ~/.ssh/id_ed25519",
        "gh auth login --with-token < token.txt",
        "export PATH=/usr/local/bin:$PATH",
        "import { createHash } from 'node:crypto';",
        "hash = hashlib.sha256(data).hexdigest()",
        "token_bytes = 32  # length of generated api keys",
        "MAX_TOKENS = 4096",
        "num_tokens = len(tokenizer.encode(text))",
        "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
        "model = 'claude-3-5-sonnet-20241022'",
        "model: gpt-4o-mini-2024-07-18",
        "const keyPair = await crypto.subtle.generateKey(params, true, ['sign']);",
        "ssh -i ~/.ssh/id_rsa ubuntu@ec2-54-12-34-56.compute-1.amazonaws.com",
        'git commit -m "Fix token refresh race in AuthProvider"',
        "@app.route('/api/v1/tokens/<token_id>', methods=['DELETE'])",
        "SELECT id, email, password_hash FROM users WHERE id = $1;",
        "class PasswordValidator(BaseValidator):",
        "password_field = driver.find_element(By.ID, 'password')",
        "base64 -d <<< \"$ENCODED\" > key.pem",
        "pip install python-dotenv==1.0.1",
        "font-family: -apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto;",
        "color: #1e90ff;",
        "background: #ff00aa url(/static/img/bg.png) no-repeat;",
        "border: 1px solid rgba(0, 0, 0, .125);",
        "box-shadow: 0 0 0 .2rem #007bff40;",
        )
    add("public_key",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7" + "q3L9kP2mXvR8aT1nW4yB6cE0dF5gH7jK9lM2nO4pQ6rS8tU0vW2xY4zA6bC8dE"
        + " alice@laptop",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk7Wm3Qp9Rz2Xv8Bn4Lc6Tf1Jd5Gh0Ks3Mu7Pa2Ye9 deploy@ci",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEq1vX3bN8mK2pL7rT4wY9uE6sD0fG\n"
        "5hJ2kM8nP3qR7tV1xZ4aC6eB9dF2gH5jL8mN0pQ3rS6tU9vW2xY5zA==\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
        "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD\n-----END CERTIFICATE-----",
        )
    add("url",
        "https://github.com/psf/requests/blob/main/src/requests/sessions.py#L512",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://docs.python.org/3/library/secrets.html#secrets.token_hex",
        "https://example.com/reset?lang=en&page=2",
        "https://s3.amazonaws.com/acme-public/assets/logo.png",
        "https://www.google.com/maps/@37.7749,-122.4194,14z",
        "https://drive.google.com/file/d/1A2b3C4d5E6f7G8h9I0jKlMnOpQrStUvW/view?usp=sharing",
        "https://open.spotify.com/track/4uLU6hMCjMI75M1A2tKUQC",
        "https://www.amazon.com/dp/B08N5WRWNW",
        "https://pypi.org/project/requests/2.31.0/",
        "https://medium.com/@jane/how-we-cut-latency-in-half-3f9a2b1c4d5e",
        "https://api.example.com/v1/users?page=3&per_page=50&sort=created_at",
        "https://stackoverflow.com/questions/4664724/distributing-django-projects-with-unique-secret-keys",
        "https://calendar.google.com/calendar/u/0/r/eventedit?text=Standup",
        "https://example.atlassian.net/browse/PROJ-1234",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "https://login.microsoftonline.com/common/oauth2/v2.0/authorize?client_id=6731de76-14a6-49ae-97bc-6eba6914391e"
        "&response_type=code",
        "https://accounts.google.com/o/oauth2/v2/auth?scope=email&response_type=code&state=xyz&redirect_uri=https%3A%2F"
        "%2Fapp.example.com%2Fcb",
        "https://cdn.jsdelivr.net/npm/bootstrap@5.3.2/dist/css/bootstrap.min.css",
        "https://user@example.com/path",
        )
    add("path",
        "/usr/local/lib/python3.11/site-packages/requests/adapters.py",
        "C:\\Users\\alice\\AppData\\Local\\Temp\\tmp8x9k2l.txt",
        "src/components/UserProfile/UserProfileSettingsPanel.tsx",
        "~/.ssh/id_ed25519.pub",
        "/etc/ssl/private/server.key",
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "node_modules/@babel/runtime/helpers/esm/asyncToGenerator.js",
        "~/.aws/credentials",
        "/home/runner/work/_temp/3f1c2b9e-7d4a-4e8f-9a21-5c6b7d8e9f01.sh",
        )
    add("version_date",
        "1.2.3-beta.4+build.567",
        "v2.14.0",
        "Python 3.11.4",
        "node v20.11.1 (npm 10.2.4)",
        "2024-03-15T14:22:07Z",
        "2024-03-15T14:22:07.123+02:00",
        "Mon, 15 Mar 2024 14:22:07 GMT",
        "build 20240315.4",
        "released 2023-11-02, patched 2024-01-17",
        "kernel 6.5.0-1014-azure",
        "go1.22.1 linux/amd64",
        "Version: 10.0.19045.3803",
        "Chrome/120.0.6099.109 Safari/537.36",
        )
    add("order_price",
        "Order #112-4567890-1234567 has shipped",
        "Invoice INV-2024-000123 is due on 2024-04-01",
        "PO 4500012345 approved",
        "see ticket #483920",
        "Case 00123456 was closed",
        "Tracking number: 1Z999AA10123456784",
        "Your confirmation code is K7XQ2P",
        "SKU 8806090572216",
        "ref: 20240315-8842-1177",
        "Total: $1,249.99 (incl. $104.16 tax)",
        "Preis: 12.345,67 EUR",
        "booking reference QX7R2M, seat 14C",
        "Flight LH401 departs 13:45 from gate B22",
        )
    add("prose",
        "The password must be at least 12 characters long.",
        "Remember to rotate your API key every 90 days.",
        "I forgot my password again lol",
        "Use `gh auth login` to authenticate.",
        "Set the token in your .env file, never commit it.",
        "my password is the same as always",
        "secret santa is on Friday",
        "Keyboard shortcut: Ctrl+Shift+P opens the command palette",
        "The API key goes in the Authorization header as a Bearer token.",
        "Tokens expire after 3600 seconds; refresh them with the refresh token.",
        "Our secret sauce is caching.",
        "Please reset my password, I'm locked out.",
        "password reset link sent to your inbox",
        "Use a passphrase like four random words.",
        "The key insight is that the index is sorted.",
        "Reminder: the token endpoint is /oauth/token",
        )
    add("misc_ids",
        "cus_NffrFeUfNV2Hib",
        "Stripe charge ch_3MmlLrLkdIwHu7ix0snN0B15 succeeded",
        "payment_intent pi_3Mtw4bLkdIwHu7ix28a3tqPa",
        "Slack channel C024BE91L, user U024BE7LH",
        "arn:aws:iam::123456789012:role/DeployRole",
        "instance i-0abcd1234efgh5678 in sg-0123456789abcdef0",
        "ami-0c55b159cbfafe1f0",
        "MongoDB ObjectId('507f1f77bcf86cd799439011')",
        "TWILIO_ACCOUNT_SID=AC" + "3b6f1c2d4e5f60718293a4b5c6d7e8f9",
        "projects/acme-prod-381204/locations/us-central1/functions/ingest",
        "Docker container 4f66ad9a0b2e exited with code 137",
        "pod api-7d9f8b6c5d-x2k4p restarted",
        "workflow run 7845123690 failed at step 3",
        "client_id = '6731de76-14a6-49ae-97bc-6eba6914391e'",
        "GOOGLE_CLIENT_ID=123456789012-abc123def456ghi789jkl012mno345pq.apps.googleusercontent.com",
        "AZURE_TENANT_ID=72f988bf-86f1-41af-91ab-2d7cd011db47",
        "AZURE_SUBSCRIPTION_ID=0b1f6471-1bf0-4dda-aec3-cb9272f09590",
        "DD_SITE=datadoghq.eu",
        "AWS_REGION=us-east-1",
        "ALGOLIA_APP_ID=LATENCY",
        "YouTube video id dQw4w9WgXcQ",
        "bundle-3f9a2c.min.js",
        "base64: SGVsbG8sIFdvcmxkIQ==",
        "eyJhbGciOiJIUzI1NiJ9",
        "data:image/png;base64,"
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5Er"
        "kJggg==",
        "//# sourceMappingURL=data:application/json;base64,eyJ2ZXJzaW9uIjozLCJzb3VyY2VzIjpbXX0=",
        "go.opentelemetry.io/otel v1.24.0 h1:0LAOdjNmQeSTzGBzduGe/rU4tZhMwL5rWgtp9Ku5Jfo=",
        "github.com/stretchr/testify v1.9.0/go.mod h1:r2ic/lqez/lEtzL7wO/rwa5dbSLXVDPFyf8C91i36aY=",
        "$2b$12$KIXQJ5z6LwQ0pQmYI9WwNeR1VbOe9S0Y6QfS5lF2Gx3cX5sY8bD0a",
        "grant_type=client_credentials&scope=read",
        "state=af0ifjsldkj&code_challenge_method=S256",
        )

    # generated identifiers in context
    for _ in range(25):
        tpl = R.choice(["request_id={}", "trace-id: {}", "user '{}' not found", "order_id = \"{}\"",
                        "tenant_id: {}", "X-Request-ID: {}", "Created job {} (queued)", "id: {}",
                        "subscription_id = '{}'", "correlation={}"])
        add("uuid", tpl.format(uid()))
    for _ in range(20):
        sha = r(HEX, 40)
        tpl = R.choice(["commit {}", "Merge {} into main", "git checkout {}", "rev: {}", "HEAD is now at {} Fix typo",
                        "{} refs/heads/main", "ref: {}", "sha={}", "Reverts {}.", "cherry-picked from commit {}"])
        add("git_sha", tpl.format(sha))
    for _ in range(6):
        add("git_sha", f"{r(HEX, 7)} Fix flaky test in auth module")
    for _ in range(15):
        kind = R.choice([64, 64, 40, 32, 128])
        h = r(HEX, kind)
        tpl = R.choice(["{}  dist/app-1.4.2.tar.gz", "sha256: {}", "checksum = \"{}\"", "ETag: \"{}\"",
                        "md5sum: {}", "SHA256 ({}) = verified", "--hash=sha256:{}", "digest {}"])
        add("hash_hex", tpl.format(h))
    for _ in range(10):
        integ = "sha512-" + base64.b64encode(R.randbytes(64)).decode()
        tpl = R.choice(['"integrity": "{}"', "  integrity {}", 'integrity="{}" crossorigin="anonymous"'])
        add("npm_integrity", tpl.format(integ))
    for _ in range(3):
        add("npm_integrity", '<script src="https://cdn.example.com/lib.js" integrity="sha384-'
            + base64.b64encode(R.randbytes(48)).decode() + '"></script>')
    for _ in range(10):
        dig = "sha256:" + r(HEX, 64)
        tpl = R.choice(["FROM python:3.12-slim@{}", "image: ghcr.io/acme/api@{}", "Digest: {}",
                        "docker pull nginx@{}", "\"config\": {{\"digest\": \"{}\"}}"])
        add("docker_digest", tpl.format(dig))
    for text in ["The quick brown fox jumps over the lazy dog", "Hello from the staging cluster!",
                 "user=alice;role=viewer;team=platform", '{"version":1,"features":["a","b"]}',
                 "Lorem ipsum dolor sit amet, consectetur adipiscing elit", "meeting notes 2024-03-15",
                 "apiVersion: v1\nkind: ConfigMap", "The configuration value is not a secret at all",
                 "ok", "<html><body>hi</body></html>"]:
        enc = base64.b64encode(text.encode()).decode()
        tpl = R.choice(["echo {} | base64 -d", "payload: {}", "content = \"{}\"", "{}", "data={}"])
        add("base64_text", tpl.format(enc))
    return lines


AMBIGUOUS = [
    ("publishable_key", "STRIPE_PUBLISHABLE_KEY=pk_live_51" + "Hq2Zx9KfL3mN8pR4tW7yB1cE6gJ0sV5uA2dF8hK3nP9qS4wX7zC"),
    ("publishable_key", "const stripe = Stripe('pk_test_TYooMQauvdEDq54NiTphI7jx');"),
    ("publishable_key", "NEXT_PUBLIC_SUPABASE_ANON_KEY=sb_publishable_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7"),
    ("doc_example_jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
                        "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"),
    ("sentry_dsn", "SENTRY_DSN=https://3f9a2b1c4d5e6f708192a3b4c5d6e7f8@o123456.ingest.sentry.io/4504123456789"),
    ("default_password", "SECRET_KEY=changeme"),
    ("default_password", "postgres://postgres:postgres@localhost:5432/test"),
    ("test_card", "Use 4242 4242 4242 4242 with any future expiry in test mode"),
    ("test_card", "card 4111111111111111 exp 12/30 cvc 123"),
    ("mapbox_public", "mapboxgl.accessToken = 'pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGV4YW1wbGUifQ.abcDEF123ghiJKL456mno';"),
    ("firebase_web_config", "apiKey: \"AIzaSyB" + "x7Kq2Lm9Np4Rs6Tv8Wx0Yz1Ab3Cd5Ef7Gh\","),
    ("placeholder_sequential", "OPENAI_API_KEY=sk-1234567890abcdef1234567890abcdef"),
]


# --------------------------------------------------------------------------------------------------------------
# PII
# --------------------------------------------------------------------------------------------------------------

def fmt_digits(pattern: str) -> str:
    out = []
    for ch in pattern:
        if ch == "X":
            out.append(R.choice(DIG))
        elif ch == "N":
            out.append(R.choice("23456789"))
        else:
            out.append(ch)
    return "".join(out)


PHONES = {
    # country: (E.164 patterns, national patterns)
    "US": (["+1 NXX NXX XXXX", "+1NXXNXXXXXX", "+1 (NXX) NXX-XXXX"],
           ["(NXX) NXX-XXXX", "NXX-NXX-XXXX", "NXX.NXX.XXXX"]),
    "UK": (["+44 7XXX XXXXXX", "+44 20 7XXX XXXX", "+447XXXXXXXXX"],
           ["07XXX XXXXXX", "020 7XXX XXXX", "0161 XXX XXXX"]),
    "DE": (["+49 30 XXXXXXXX", "+49 151 XXXXXXXX"], ["030 XXXXXXXX", "0151 XXXXXXXX", "089/XXXXXXX"]),
    "FR": (["+33 6 XX XX XX XX", "+33 1 XX XX XX XX"], ["06 XX XX XX XX", "01 XX XX XX XX", "06.XX.XX.XX.XX"]),
    "ES": (["+34 6XX XXX XXX"], ["6XX XXX XXX", "91X XX XX XX"]),
    "IT": (["+39 3XX XXX XXXX", "+39 06 XXXX XXXX"], ["3XX XXX XXXX", "06 XXXX XXXX"]),
    "NL": (["+31 6 XXXXXXXX", "+31 20 XXX XXXX"], ["06-XXXXXXXX", "020 XXX XXXX"]),
    "BE": (["+32 47X XX XX XX"], ["047X XX XX XX", "02 XXX XX XX"]),
    "CH": (["+41 79 XXX XX XX", "+41 44 XXX XX XX"], ["079 XXX XX XX", "044 XXX XX XX"]),
    "AT": (["+43 664 XXXXXXX"], ["0664 XXXXXXX", "01 XXXXXXX"]),
    "SE": (["+46 70 XXX XX XX"], ["070-XXX XX XX", "08-XXX XXX XX"]),
    "NO": (["+47 4XX XX XXX"], ["4XX XX XXX", "22 XX XX XX"]),
    "DK": (["+45 XX XX XX XX"], ["2X XX XX XX"]),
    "FI": (["+358 40 XXX XXXX"], ["040 XXX XXXX", "09 XXXX XXXX"]),
    "PL": (["+48 5XX XXX XXX"], ["5XX XXX XXX", "22 XXX XX XX"]),
    "PT": (["+351 91X XXX XXX"], ["91X XXX XXX", "21X XXX XXX"]),
    "IE": (["+353 8X XXX XXXX"], ["08X XXX XXXX", "01 XXX XXXX"]),
    "JP": (["+81 90 XXXX XXXX", "+81 3 XXXX XXXX"], ["090-XXXX-XXXX", "03-XXXX-XXXX"]),
    "KR": (["+82 10 XXXX XXXX"], ["010-XXXX-XXXX", "02-XXX-XXXX"]),
    "CN": (["+86 13X XXXX XXXX"], ["13X XXXX XXXX", "13XXXXXXXXX"]),
    "IN": (["+91 9XXXX XXXXX", "+919XXXXXXXXX"], ["09XXXX XXXXX", "9XXXX XXXXX"]),
    "AU": (["+61 4XX XXX XXX", "+61 2 XXXX XXXX"], ["04XX XXX XXX", "(02) XXXX XXXX"]),
    "NZ": (["+64 21 XXX XXXX"], ["021 XXX XXXX", "09 XXX XXXX"]),
    "BR": (["+55 11 9XXXX-XXXX", "+55 21 9XXXX XXXX"], ["(11) 9XXXX-XXXX", "(21) 9XXXX-XXXX"]),
    "MX": (["+52 55 XXXX XXXX"], ["55 XXXX XXXX", "(55) XXXX-XXXX"]),
    "ZA": (["+27 8X XXX XXXX"], ["08X XXX XXXX", "021 XXX XXXX"]),
    "CA": (["+1 416 NXX XXXX"], ["(604) NXX-XXXX", "416-NXX-XXXX"]),
    "SG": (["+65 9XXX XXXX"], ["9XXX XXXX"]),
    "RU": (["+7 495 XXX-XX-XX", "+7 9XX XXX-XX-XX"], ["8 (495) XXX-XX-XX", "8 9XX XXX-XX-XX"]),
    "TR": (["+90 53X XXX XX XX"], ["053X XXX XX XX"]),
    "IL": (["+972 5X-XXX-XXXX"], ["05X-XXX-XXXX"]),
    "PH": (["+63 9XX XXX XXXX"], ["09XX XXX XXXX"]),
}

PHONE_SENTENCES = ["Call me at {v}", "my number is {v}", "Phone: {v}", "reach her on {v} after 6pm",
                   "Tel. {v}", "WhatsApp {v} if urgent"]


def iban(cc: str, bban: str) -> str:
    num = "".join(str(int(ch, 36)) for ch in bban + cc + "00")
    check = 98 - int(num) % 97
    return f"{cc}{check:02d}{bban}"


IBAN_BBAN = {"DE": lambda: r(DIG, 18), "GB": lambda: r(UPP, 4) + r(DIG, 14), "FR": lambda: r(DIG, 23),
             "ES": lambda: r(DIG, 20), "NL": lambda: r(UPP, 4) + r(DIG, 10), "IT": lambda: r(UPP, 1) + r(DIG, 22),
             "BE": lambda: r(DIG, 12), "CH": lambda: r(DIG, 17), "AT": lambda: r(DIG, 16), "PL": lambda: r(DIG, 24),
             "IE": lambda: r(UPP, 4) + r(DIG, 14), "SE": lambda: r(DIG, 20)}


def luhn_digit(partial: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(partial)):
        n = int(ch)
        if i % 2 == 0:
            n *= 2
            if n > 9:
                n -= 9
        total += n
    return str((10 - total % 10) % 10)


def luhn_ok(number: str) -> bool:
    return luhn_digit(number[:-1]) == number[-1]


CARDS = {"visa16": ("4", 16), "visa13": ("4", 13), "visa19": ("4", 19), "mastercard": ("5", 16),
         "mastercard_2series": ("2", 16), "amex": ("3", 15), "discover": ("6011", 16), "jcb": ("35", 16),
         "diners": ("36", 14), "maestro12": ("6759", 12), "unionpay19": ("62", 19)}


def card_number(kind: str) -> str:
    prefix, length = CARDS[kind]
    if kind == "mastercard":
        prefix = str(R.randint(51, 55))
    elif kind == "mastercard_2series":
        prefix = str(R.randint(2221, 2720))
    elif kind == "amex":
        prefix = R.choice(["34", "37"])
    body = prefix + r(DIG, length - len(prefix) - 1)
    return body + luhn_digit(body)


def group_card(num: str, sep: str) -> str:
    if len(num) == 15:
        parts = [num[:4], num[4:10], num[10:]]
    elif len(num) == 14:
        parts = [num[:4], num[4:10], num[10:]]
    else:
        parts = [num[i:i + 4] for i in range(0, len(num), 4)]
    return sep.join(parts)


def ssn() -> tuple[str, str, str]:
    area = R.choice([x for x in range(1, 900) if x != 666])
    return f"{area:03d}", f"{R.randint(1, 99):02d}", f"{R.randint(1, 9999):04d}"


def nino() -> str:
    first = R.choice("ABCEGHJKLMNPRSTWXYZ")
    second = R.choice("ABCEGHJKLMNPRSTWXYZ")
    while first + second in ("BG", "GB", "NK", "KN", "TN", "NT", "ZZ"):
        second = R.choice("ABCEGHJKLMNPRSTWXYZ")
    return first + second + r(DIG, 6) + R.choice("ABCD")


def ipv6() -> str:
    groups = [format(R.getrandbits(16), "x") for _ in range(8)]
    groups[0] = R.choice(["2a02", "2001", "2600", "2607", "2a01", "2c0f", "fe80"])
    return ":".join(groups)


def pii_samples() -> list[dict]:
    out = []

    def add(kind: str, text: str, value: str) -> None:
        out.append({"kind": kind, "text": text, "value": value})

    emails = ["alice.smith+newsletter@gmail.com", "bob@example.co.uk", "first_last-99@sub.mail.example.org",
              "jürgen.müller@beispiel.de", "josé@correo.es", "用户@例子.广告", "иван@почта.рф",
              '"john doe"@example.com', "o'brien@company.ie", "user@xn--bcher-kva.example",
              "support+ticket-4412@helpdesk.acme.io", "j.doe@mail.stanford.edu", "x@y.io", "CAPS.User@Example.COM",
              "dev.ops@münchen.de", '"very.unusual.@.unusual.com"@example.com']
    for e in emails:
        add("email", R.choice(["email me at {v}", "contact: {v}", "<{v}>", "From: Jane <{v}>", "send it to {v} pls",
                               "{v}"]).replace("{v}", e), e)
    for country, (e164s, nationals) in PHONES.items():
        for pat in e164s:
            v = fmt_digits(pat)
            add("phone_e164", R.choice(PHONE_SENTENCES).replace("{v}", v), v)
        for pat in nationals:
            v = fmt_digits(pat)
            add(f"phone_national_{country}", R.choice(PHONE_SENTENCES).replace("{v}", v), v)
    for cc, gen in IBAN_BBAN.items():
        code = iban(cc, gen())
        add("iban", f"IBAN: {code}", code)
        spaced = " ".join(code[i:i + 4] for i in range(0, len(code), 4))
        add("iban", f"please wire it to {spaced} by Friday", spaced)
    for kind in CARDS:
        for sep in ["", " ", "-"]:
            num = card_number(kind)
            v = group_card(num, sep) if sep else num
            add(f"card_{kind}", R.choice(["card: {v}", "charge it to {v} exp 04/27", "my card is {v}",
                                          "CC {v} cvv 123"]).replace("{v}", v), v)
    for tpl in ["SSN: {a}-{g}-{s}", "social security number {a} {g} {s}", "SSN#{a}{g}{s}", "ss no. {a}-{g}-{s}",
                "Social Security No: {a}.{g}.{s}", "my ssn is {a}{g}{s}", "S.S.N. {a}-{g}-{s}",
                "social-security: {a} - {g} - {s}"]:
        a, g, s = ssn()
        text = tpl.format(a=a, g=g, s=s)
        value = text.split(" ", 1)[-1] if "#" not in text else text.split("#", 1)[1]
        value = text[text.index(a):]
        add("ssn", text, value)
    for v in ["84.17.45.201", "192.168.1.20", "10.0.3.17", "172.16.254.1", "8.8.8.8", "203.0.113.54",
              "100.64.12.7", "45.33.32.156"]:
        add("ipv4", R.choice(["Failed login from {v}", "server at {v}", "ssh ubuntu@{v}", "X-Forwarded-For: {v}",
                              "client={v} port=443"]).replace("{v}", v), v)
    for v in [ipv6(), ipv6(), "fe80::1ff:fe23:4567:890a", "2001:db8::8a2e:370:7334", "2a02:8108:1c0:4e00::7c11",
              "::ffff:84.17.45.201", ipv6().upper(), "2001:4860:4860::8888"]:
        add("ipv6", R.choice(["Failed login from {v}", "peer [{v}]:443", "client ip {v}", "AAAA record -> {v}"])
            .replace("{v}", v), v)
    for _ in range(5):
        n = nino()
        add("uk_nino", f"NI number: {n}", n)
        spaced = f"{n[:2]} {n[2:4]} {n[4:6]} {n[6:8]} {n[8]}"
        add("uk_nino", f"my national insurance no is {spaced}", spaced)
    return out


PII_LOOKALIKES = [
    "2024-03-15 14:22:07",
    "unix time 1710512527",
    "timestamp_ms=1710512527123",
    "Total: $1,249.99",
    "€ 1.234,56 incl. VAT",
    "version 10.2.3",
    "Chrome/120.0.6099.109",
    "v4.19.2.1002",
    "ISBN 978-0-306-40615-7",
    "ISBN-10 0-306-40615-2",
    "UPS 1Z999AA10123456784",
    "USPS 9400 1000 0000 0000 0000 00",
    "FedEx tracking 7712 3456 7891",
    "Order 112-4567890-1234567",
    "call ext. 4521",
    "Room 1203, Floor 12",
    "GPS 37.7749, -122.4194",
    "MAC 00:1A:2B:3C:4D:5E",
    "at 12:30:45 UTC",
    "aspect ratio 16:9",
    "std::chrono::seconds timeout{30};",
    "ZIP 94103-1234",
    "years 1999-2024",
    "build 2024.03.15.1",
    "OID 1.3.6.1.4.1.311.21.8",
    "lodash@4.17.21",
    "npm install @types/node@20.11.5",
    "git@github.com:acme/infra.git",
    "Part no. 536-22-1234",
    "NI example QQ 12 34 56 C",
    "IBAN DE00 1234 5678 9012 3456 78",
    "Invoice 4821 9930 1174 2232",
    "EAN 4006381333931",
    "Score 3-2 after 90:00",
    "Follow @kumiho_dev on X",
    "Page 12 of 340, lines 1200-1300",
    "PIN code length 6",
    "Serial SN-20240315-00042",
    "Ticket #2024031512",
    "commit 3f2a9c1",
    "Approx 1,000,000 users; 99.95% uptime",
    "Resolution 1920x1080 @ 144Hz",
    "Coordinates 48.8566 N, 2.3522 E",
    "Temperature 21.5°C at 08:00",
]


# --------------------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------------------

def partial_leak(secrets: list[str], redacted: str) -> bool:
    """True when a long fragment (>= max(16, half its length)) of a secret survives redaction."""
    for sec in secrets:
        width = max(16, len(sec) // 2)
        if len(sec) > width and any(sec[i:i + width] in redacted for i in range(len(sec) - width + 1)):
            return True
    return False


def rate(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=20240315)
    parser.add_argument("--quiet", action="store_true", help="summarise misses instead of listing every line")
    args = parser.parse_args()
    R.seed(args.seed)
    define_families()
    started = time.perf_counter()

    samples = credential_samples()
    fps = fp_corpus()
    pii = pii_samples()
    for card in [s for s in pii if s["kind"].startswith("card_")]:
        assert luhn_ok(card["value"].replace(" ", "").replace("-", "")), card

    # credentials
    per_family = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    per_template = collections.defaultdict(lambda: [0, 0])
    misses = collections.defaultdict(list)
    partials = collections.defaultdict(list)
    placement_tot = collections.defaultdict(lambda: [0, 0])
    family_label_mismatch = collections.Counter()
    for s in samples:
        redacted, _ = km.redact_credential_text(s["text"])
        hit = not any(sec in redacted for sec in s["secrets"])
        cell = per_family[s["family"]][s["placement"]]
        cell[0] += hit
        cell[1] += 1
        placement_tot[s["placement"]][0] += hit
        placement_tot[s["placement"]][1] += 1
        if s["placement"] == "context":
            t = per_template[s["template"].split(":")[0]]
            t[0] += hit
            t[1] += 1
        if not hit:
            misses[s["family"]].append((s["placement"], s["template"], s["text"]))
        elif partial_leak(s["secrets"], redacted):
            partials[s["family"]].append((s["placement"], s["template"], s["text"], redacted))

    # false positives
    fp_changed = collections.defaultdict(list)
    fp_tot = collections.Counter()
    for cat, line in fps:
        fp_tot[cat] += 1
        redacted, _ = km.redact_credential_text(line)
        if redacted != line:
            fp_changed[cat].append((line, redacted))
    ambiguous = []
    for cat, line in AMBIGUOUS:
        redacted, _ = km.redact_credential_text(line)
        ambiguous.append((cat, line, redacted != line, redacted))

    # PII
    pii_kind = collections.defaultdict(lambda: [0, 0])
    pii_misses = collections.defaultdict(list)
    for s in pii:
        anon = km.anonymize_pii_text(s["text"])
        hit = s["value"] not in anon
        group = "phone_national" if s["kind"].startswith("phone_national") else (
            "card" if s["kind"].startswith("card_") else s["kind"])
        pii_kind[group][0] += hit
        pii_kind[group][1] += 1
        if s["kind"] != group:
            pii_kind[s["kind"]][0] += hit
            pii_kind[s["kind"]][1] += 1
        if not hit:
            pii_misses[s["kind"]].append((s["text"], anon))
    look_changed = []
    look_cred_changed = []
    for line in PII_LOOKALIKES:
        anon = km.anonymize_pii_text(line)
        if anon != line:
            look_changed.append((line, anon))
        red, _ = km.redact_credential_text(line)
        if red != line:
            look_cred_changed.append((line, red))
    # credential FP corpus through PII too (informational)
    fp_pii_changed = [(line, km.anonymize_pii_text(line)) for _, line in fps
                      if km.anonymize_pii_text(line) != line]
    elapsed = time.perf_counter() - started

    # ---- report
    print(f"{len(samples)} credential samples over {len(per_family)} families; {len(fps)} FP lines; "
          f"{len(pii)} PII samples; {len(PII_LOOKALIKES)} PII look-alikes; {elapsed:.1f}s\n")
    print(f"{'family':<34} {'context':>12} {'bare':>12}")
    for fam in sorted(per_family):
        cells = per_family[fam]
        ctx = cells.get("context", [0, 0])
        bare = [sum(cells[p][0] for p in cells if p != "context"), sum(cells[p][1] for p in cells if p != "context")]
        bare_s = f"{bare[0]}/{bare[1]}" if bare[1] else "-"
        print(f"{fam:<34} {ctx[0]:>5}/{ctx[1]:<6} {bare_s:>12}")
    print(f"\npartial leaks (caught but a long fragment survives): {sum(len(v) for v in partials.values())}")
    print("\nplacement totals:")
    for p, (h, t) in sorted(placement_tot.items()):
        print(f"  {p:<14} {h}/{t} = {rate(h, t):.3f}")
    print("\ncontext catch rate by template:")
    for tname, (h, t) in sorted(per_template.items(), key=lambda kv: rate(*kv[1])):
        print(f"  {tname:<24} {h}/{t} = {rate(h, t):.3f}")
    fp_total = sum(fp_tot.values())
    fp_n = sum(len(v) for v in fp_changed.values())
    print(f"\nfalse positives: {fp_n}/{fp_total} = {rate(fp_n, fp_total):.3f}")
    for cat in sorted(fp_tot):
        print(f"  {cat:<16} {len(fp_changed.get(cat, []))}/{fp_tot[cat]}")
    print("\nPII catch by kind:")
    for kind in sorted(pii_kind):
        h, t = pii_kind[kind]
        print(f"  {kind:<32} {h}/{t}")
    pii_h = sum(v[0] for k, v in pii_kind.items() if k in ("email", "phone_e164", "phone_national", "iban", "card",
                                                            "ssn", "ipv4", "ipv6", "uk_nino"))
    pii_t = sum(v[1] for k, v in pii_kind.items() if k in ("email", "phone_e164", "phone_national", "iban", "card",
                                                            "ssn", "ipv4", "ipv6", "uk_nino"))
    print(f"  PII overall {pii_h}/{pii_t} = {rate(pii_h, pii_t):.3f}")
    print(f"  PII look-alikes changed by anonymize_pii_text: {len(look_changed)}/{len(PII_LOOKALIKES)}")
    print(f"  PII look-alikes changed by redact_credential_text: {len(look_cred_changed)}/{len(PII_LOOKALIKES)}")
    print(f"  credential-FP lines changed by anonymize_pii_text (info): {len(fp_pii_changed)}/{len(fps)}")

    print("\nambiguous (not scored):")
    for cat, line, changed, red in ambiguous:
        print(f"  [{'changed' if changed else 'kept   '}] {cat}: {line!r}")

    print("\n=== MISSES by family ===")
    for fam in sorted(misses):
        items = misses[fam]
        print(f"\n## {fam} ({len(items)} missed)")
        shown = items if not args.quiet else items[:3]
        for placement, tname, text in shown:
            print(f"  [{placement}/{tname}] {text!r}")
    print("\n=== PARTIAL LEAKS (counted as caught, but a long fragment of the secret survives) ===")
    for fam in sorted(partials):
        items = partials[fam]
        print(f"\n## {fam} ({len(items)} partial)")
        for placement, tname, text, red in (items if not args.quiet else items[:3]):
            print(f"  [{placement}/{tname}] {text!r}\n    -> {red!r}")
    print("\n=== FALSE POSITIVES by category ===")
    for cat in sorted(fp_changed):
        print(f"\n## {cat}")
        for line, red in fp_changed[cat]:
            print(f"  {line!r}\n    -> {red!r}")
    print("\n=== PII MISSES by kind ===")
    for kind in sorted(pii_misses):
        print(f"\n## {kind}")
        for text, anon in pii_misses[kind]:
            print(f"  {text!r} -> {anon!r}")
    print("\n=== PII LOOK-ALIKES CHANGED ===")
    for line, anon in look_changed:
        print(f"  anonymize: {line!r} -> {anon!r}")
    for line, red in look_cred_changed:
        print(f"  redact:    {line!r} -> {red!r}")
    print("\n=== credential-FP corpus lines changed by anonymize_pii_text (info) ===")
    for line, anon in fp_pii_changed:
        print(f"  {line!r} -> {anon!r}")

    figures = {
        "credential_samples": len(samples), "families": len(per_family),
        "placement": {p: {"caught": h, "total": t, "rate": rate(h, t)} for p, (h, t) in placement_tot.items()},
        "per_family": {fam: {p: {"caught": h, "total": t} for p, (h, t) in cells.items()}
                       for fam, cells in per_family.items()},
        "per_template": {k: {"caught": h, "total": t, "rate": rate(h, t)} for k, (h, t) in per_template.items()},
        "false_positives": {"changed": fp_n, "total": fp_total, "rate": rate(fp_n, fp_total),
                            "by_category": {c: {"changed": len(fp_changed.get(c, [])), "total": fp_tot[c]}
                                            for c in fp_tot},
                            "lines": {c: [ln for ln, _ in v] for c, v in fp_changed.items()}},
        "ambiguous": [{"category": c, "line": ln, "changed": ch} for c, ln, ch, _ in ambiguous],
        "pii": {k: {"caught": h, "total": t} for k, (h, t) in pii_kind.items()},
        "pii_overall": {"caught": pii_h, "total": pii_t, "rate": rate(pii_h, pii_t)},
        "pii_lookalikes_changed": [ln for ln, _ in look_changed],
        "pii_lookalikes_changed_by_credential_redaction": [ln for ln, _ in look_cred_changed],
        "misses": {fam: [{"placement": p, "template": t, "text": x} for p, t, x in v] for fam, v in misses.items()},
        "partial_leaks": {fam: [{"placement": p, "template": t, "text": x, "redacted": y} for p, t, x, y in v]
                          for fam, v in partials.items()},
        "pii_misses": {k: [t for t, _ in v] for k, v in pii_misses.items()},
        "seconds": round(elapsed, 2),
    }
    path = write_results("privacy_redteam", {"seed": args.seed}, figures)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
