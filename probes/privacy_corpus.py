"""Synthetic corpora for the privacy probe and tests: secrets by family, look-alikes, and personal data.

Nothing here is a real secret. Every token is generated with ``random.Random(seed)`` from its provider's
documented format (prefix, length, alphabet; GitHub's CRC32 checksum, Bitcoin's base58check, an IBAN's mod-97
check digits, a card's Luhn digit), so the same seed always gives the same corpus.

Frames and templates come in two parts. ``DEV`` is what the detection engine was tuned on; ``HELD_OUT`` was
written first and not looked at while tuning, so its figures say how the engine does on phrasing it never
saw. The probe reports both.

Public names:
    credential_samples(split, seed) -> list[Sample]     a secret in a line shape or a chat sentence
    credential_false_positives() -> list[tuple[str, str]]  (group, text) that must stay unchanged
    pii_samples(split, seed) -> list[PIISample]          personal data in a sentence
    pii_lookalikes() -> list[str]                         numbers and strings that are not personal data
    FAMILY_FORMATS                                        family -> format specs the generators use
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import string
import zlib

DEV = "dev"
HELD_OUT = "held_out"

ALPHABETS = {
    "b62": string.ascii_letters + string.digits,
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "b64u": string.ascii_letters + string.digits + "_-",
    "b64": string.ascii_letters + string.digits + "+/",
    "UD": string.ascii_uppercase + string.digits,
    "ld": string.ascii_lowercase + string.digits,
    "l": string.ascii_lowercase,
    "L": string.ascii_letters,
    "d": string.digits,
    "b32l": "abcdefghijklmnopqrstuvwxyz234567",
    "bech": "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L",
    "ah": "abcdefgh0123456789",
}


def _fill(spec: str, rng: random.Random) -> str:
    """Expand ``{alphabet:n}``, ``{alphabet:n-m}`` and ``{uuid}`` in a format spec."""
    out, index = [], 0
    while index < len(spec):
        if spec[index] == "{":
            close = spec.index("}", index)
            field = spec[index + 1:close]
            if field == "uuid":
                out.append(str(_uuid(rng)))
            else:
                name, count = field.split(":")
                low, _, high = count.partition("-")
                size = rng.randint(int(low), int(high or low))
                out.append("".join(rng.choice(ALPHABETS[name]) for _ in range(size)))
            index = close + 1
        else:
            out.append(spec[index])
            index += 1
    return "".join(out)


def _uuid(rng: random.Random) -> str:
    raw = "".join(rng.choice("0123456789abcdef") for _ in range(32))
    return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def github_token(prefix: str, rng: random.Random) -> str:
    """A GitHub-format token: 30 random base62 characters and base62(CRC32) of them, padded to 6."""
    entropy = "".join(rng.choice(_B62) for _ in range(30))
    value, tail = zlib.crc32(entropy.encode()), ""
    while value:
        value, digit = divmod(value, 62)
        tail = _B62[digit] + tail
    return prefix + entropy + tail.rjust(6, "0")


def _base58check(payload: bytes) -> str:
    raw = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number, out = int.from_bytes(raw, "big"), ""
    while number:
        number, digit = divmod(number, 58)
        out = _B58[digit] + out
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + out


def bitcoin_wif(rng: random.Random) -> str:
    return _base58check(b"\x80" + bytes(rng.randrange(256) for _ in range(32)) + b"\x01")


def bitcoin_xprv(rng: random.Random) -> str:
    body = bytes.fromhex("0488ade4") + bytes(rng.randrange(256) for _ in range(9 + 32)) + b"\0" + bytes(
        rng.randrange(256) for _ in range(32))
    return _base58check(body)


def jwt(rng: random.Random) -> str:
    import base64
    import json

    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header = part({"alg": "HS256", "typ": "JWT"})
    payload = part({"sub": str(rng.randrange(10**9)), "iat": 1700000000 + rng.randrange(10**6)})
    signature = "".join(rng.choice(ALPHABETS["b64u"]) for _ in range(43))
    return f"{header}.{payload}.{signature}"


def pem_key(rng: random.Random) -> str:
    lines = ["".join(rng.choice(ALPHABETS["b64"]) for _ in range(64)) for _ in range(6)]
    kind = rng.choice(["RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED "])
    return f"-----BEGIN {kind}PRIVATE KEY-----\n" + "\n".join(lines) + f"\n-----END {kind}PRIVATE KEY-----"


# family -> (provider word for prose, [format specs]); a spec is a string for _fill or a callable(rng).
FAMILY_FORMATS: dict[str, tuple[str, list]] = {
    "aws": ("AWS", ["AKIA{UD:16}", "ASIA{UD:16}"]),
    "amazon_mws": ("Amazon MWS", ["amzn.mws.{uuid}"]),
    "google": ("Google", ["AIza{b64u:35}", "GOCSPX-{b64u:28}", "ya29.{b64u:80}", "1//0{b64u:60}"]),
    "firebase": ("Firebase", ["AAAA{b64u:7}:APA91b{b64u:134}"]),
    "azure": ("Azure", ["{b62:3}8Q~{b64u:31}"]),
    "alibaba": ("Alibaba", ["LTAI{b62:20}"]),
    "tencent": ("Tencent", ["AKID{b62:32}"]),
    "yandex": ("Yandex", ["AQVN{b64u:36}", "y0_{b64u:58}"]),
    "digitalocean": ("DigitalOcean", ["dop_v1_{hex:64}", "doo_v1_{hex:64}"]),
    "scaleway": ("Scaleway", ["SCW{UD:17}"]),
    "heroku": ("Heroku", ["HRKU-{b64u:60}"]),
    "flyio": ("Fly.io", ["fo1_{b64u:43}"]),
    "netlify": ("Netlify", ["nfp_{b62:36}"]),
    "vercel": ("Vercel", ["vercel_blob_rw_{b62:16}_{b62:30}"]),
    "render": ("Render", ["rnd_{b62:32}"]),
    "supabase": ("Supabase", ["sbp_{hex:40}"]),
    "planetscale": ("PlanetScale", ["pscale_tkn_{b64u:43}", "pscale_pw_{b64u:43}"]),
    "neon": ("Neon", ["napi_{ld:64}"]),
    "terraform": ("Terraform", ["{b62:14}.atlasv1.{b64u:67}"]),
    "vault": ("Vault", ["hvs.{b64u:95}"]),
    "pulumi": ("Pulumi", ["pul-{hex:40}"]),
    "doppler": ("Doppler", ["dp.pt.{b62:43}", "dp.st.{b62:43}"]),
    "onepassword": ("1Password", ["ops_eyJ{b64u:200}"]),
    "age": ("age", ["AGE-SECRET-KEY-1{bech:58}"]),
    "openshift": ("OpenShift", ["sha256~{b64u:43}"]),
    "rancher": ("Rancher", ["token-{ld:5}:{ld:54}"]),
    "portainer": ("Portainer", ["ptr_{b64:44}"]),
    "github": ("GitHub", [lambda r: github_token("ghp_", r), lambda r: github_token("gho_", r),
                          lambda r: github_token("ghs_", r), "github_pat_{b62:22}_{b62:59}"]),
    "gitlab": ("GitLab", ["glpat-{b64u:20}", "gldt-{b64u:20}", "glrt-{b64u:20}", "glptt-{hex:40}"]),
    "bitbucket": ("Bitbucket", ["ATBB{b62:32}"]),
    "atlassian": ("Atlassian", ["ATATT3{b64u:180}={HEX:8}"]),
    "buildkite": ("Buildkite", ["bkua_{hex:40}"]),
    "circleci": ("CircleCI", ["CCIPAT_{b62:22}_{hex:40}"]),
    "sonarqube": ("SonarQube", ["squ_{hex:40}", "sqp_{hex:40}"]),
    "npm": ("npm", ["npm_{b62:36}"]),
    "pypi": ("PyPI", ["pypi-AgEIcHlwaS5vcmc{b64u:120}"]),
    "rubygems": ("RubyGems", ["rubygems_{hex:48}"]),
    "nuget": ("NuGet", ["oy2{ld:43}"]),
    "docker": ("Docker Hub", ["dckr_pat_{b64u:27}"]),
    "jfrog": ("JFrog", ["AKCp{b62:69}"]),
    "octopus": ("Octopus", ["API-{UD:27}"]),
    "deno": ("Deno", ["ddp_{b62:36}"]),
    "prefect": ("Prefect", ["pnu_{b62:36}"]),
    "readme": ("ReadMe", ["rdme_{ld:70}"]),
    "scalingo": ("Scalingo", ["tk-us-{b64u:48}"]),
    "postman": ("Postman", ["PMAK-{hex:24}-{hex:34}"]),
    "infracost": ("Infracost", ["ico-{b62:32}"]),
    "harness": ("Harness", ["pat.{b64u:22}.{hex:24}.{b62:20}"]),
    "launchdarkly": ("LaunchDarkly", ["api-{uuid}", "sdk-{uuid}"]),
    "contentful": ("Contentful", ["CFPAT-{b64u:43}"]),
    "frameio": ("Frame.io", ["fio-u-{b64u:64}"]),
    "figma": ("Figma", ["figd_{b64u:40}"]),
    "adobe": ("Adobe", ["p8e-{b62:32}"]),
    "linear": ("Linear", ["lin_api_{b62:40}"]),
    "notion": ("Notion", ["secret_{b62:43}", "ntn_{d:11}{b62:35}"]),
    "airtable": ("Airtable", ["pat{b62:14}.{hex:64}"]),
    "clickup": ("ClickUp", ["pk_{d:8}_{UD:32}"]),
    "dropbox": ("Dropbox", ["sl.{b64u:138}"]),
    "typeform": ("Typeform", ["tfp_{b64u:44}"]),
    "asana": ("Asana", ["1/{d:16}:{hex:32}"]),
    "slack": ("Slack", ["xoxb-{d:12}-{d:13}-{b62:24}", "xoxp-{d:12}-{d:12}-{d:13}-{hex:32}",
                        "https://hooks.slack.com/services/T{UD:8}/B{UD:10}/{b62:24}"]),
    "discord": ("Discord", ["https://discord.com/api/webhooks/{d:18}/{b64u:68}", "M{b64u:23}.{b64u:6}.{b64u:27}"]),
    "telegram": ("Telegram", ["{d:10}:AA{b64u:33}"]),
    "teams": ("Teams", ["https://acme.webhook.office.com/webhookb2/{uuid}@{uuid}/IncomingWebhook/{hex:32}/{uuid}"]),
    "zapier": ("Zapier", ["https://hooks.zapier.com/hooks/catch/{d:7}/{ld:6}/"]),
    "twilio": ("Twilio", ["SK{hex:32}"]),
    "sendgrid": ("SendGrid", ["SG.{b64u:22}.{b64u:43}"]),
    "mailgun": ("Mailgun", ["key-{hex:32}"]),
    "mailchimp": ("Mailchimp", ["{hex:32}-us{d:2}"]),
    "mailersend": ("MailerSend", ["mlsn.{hex:64}"]),
    "brevo": ("Brevo", ["xkeysib-{hex:64}-{b62:16}"]),
    "resend": ("Resend", ["re_{b62:8}_{b62:24}"]),
    "intercom": ("Intercom", ["dG9rOi{b64:54}="]),
    "hubspot": ("HubSpot", ["pat-na1-{uuid}"]),
    "segment": ("Segment", ["sgp_{b62:64}"]),
    "sourcegraph": ("Sourcegraph", ["sgp_{hex:16}_{hex:40}"]),
    "posthog": ("PostHog", ["phx_{b62:43}"]),
    "tailscale": ("Tailscale", ["tskey-auth-{b62:12}-{b62:32}"]),
    "newrelic": ("New Relic", ["NRAK-{UD:27}", "{hex:36}NRAL"]),
    "dynatrace": ("Dynatrace", ["dt0c01.{UD:24}.{UD:64}"]),
    "sentry": ("Sentry", ["sntryu_{hex:64}", "sntrys_eyJ{b64u:120}"]),
    "grafana": ("Grafana", ["glc_{b64:60}", "glsa_{b62:32}_{hex:8}"]),
    "honeybadger": ("Honeybadger", ["hbp_{b62:36}"]),
    "honeycomb": ("Honeycomb", ["hcaik_{ld:58}"]),
    "stripe": ("Stripe", ["sk_live_{b62:24}", "rk_live_{b62:24}", "sk_test_{b62:99}", "whsec_{b62:32}"]),
    "checkout": ("Checkout.com", ["sk_sbox_{b32l:26}"]),
    "square": ("Square", ["sq0atp-{b64u:22}", "sq0csp-{b64u:43}", "EAAA{b64u:60}"]),
    "braintree": ("Braintree", ["access_token$production${ld:16}${hex:32}"]),
    "shopify": ("Shopify", ["shpat_{hex:32}", "shpss_{hex:32}"]),
    "woocommerce": ("WooCommerce", ["ck_{hex:40}", "cs_{hex:40}"]),
    "razorpay": ("Razorpay", ["rzp_live_{b62:14}"]),
    "flutterwave": ("Flutterwave", ["FLWSECK_TEST-{ah:32}-X"]),
    "plaid": ("Plaid", ["access-production-{uuid}"]),
    "shippo": ("Shippo", ["shippo_live_{hex:40}"]),
    "easypost": ("EasyPost", ["EZAK{b62:54}"]),
    "duffel": ("Duffel", ["duffel_live_{b64u:43}"]),
    "salesforce": ("Salesforce", ["00D{b62:15}!{b62:96}"]),
    "facebook": ("Facebook", ["EAAB{b62:150}"]),
    "twitter": ("Twitter", ["AAAAAAAAAAAAAAAAAAAAA{b62:80}"]),
    "instagram": ("Instagram", ["IGQV{b64u:160}"]),
    "pinterest": ("Pinterest", ["pina_{b62:96}"]),
    "mapbox": ("Mapbox", ["sk.eyJ{b64u:60}.{b64u:22}"]),
    "openai": ("OpenAI", ["sk-proj-{b64u:120}", "sk-{b62:20}T3BlbkFJ{b62:20}"]),
    "anthropic": ("Anthropic", ["sk-ant-api03-{b64u:93}AA"]),
    "openrouter": ("OpenRouter", ["sk-or-v1-{hex:64}"]),
    "huggingface": ("Hugging Face", ["hf_{L:34}"]),
    "groq": ("Groq", ["gsk_{b62:52}"]),
    "replicate": ("Replicate", ["r8_{b62:37}"]),
    "perplexity": ("Perplexity", ["pplx-{b62:48}"]),
    "xai": ("xAI", ["xai-{b62:80}"]),
    "cerebras": ("Cerebras", ["csk-{ld:48}"]),
    "langsmith": ("LangSmith", ["lsv2_pt_{hex:32}_{hex:10}"]),
    "elevenlabs": ("ElevenLabs", ["sk_{hex:48}"]),
    "pinecone": ("Pinecone", ["pcsk_{b62:6}_{b62:60}"]),
    "fireworks": ("Fireworks", ["fw_{b62:24}"]),
    "anyscale": ("Anyscale", ["esecret_{b64u:40}"]),
    "databricks": ("Databricks", ["dapi{hex:32}"]),
    "adafruit": ("Adafruit", ["aio_{b62:28}"]),
    "akamai": ("Akamai", ["akab-{ld:16}-{ld:16}"]),
    "cloudflare": ("Cloudflare", ["v1.0-{hex:24}-{hex:146}"]),
    "bitcoin": ("Bitcoin", [bitcoin_wif, bitcoin_xprv]),
    "jwt": ("JWT", [jwt]),
    "private_key": ("private key", [pem_key]),
}

# Families recognised only next to their provider's name: (provider word, spec).
CONTEXT_FORMATS: dict[str, tuple[str, str]] = {
    "heroku": ("heroku", "{uuid}"), "twilio": ("twilio", "{hex:32}"), "datadog": ("datadog", "{hex:32}"),
    "mailgun": ("mailgun", "{hex:32}-{hex:8}-{hex:8}"), "okta": ("okta", "00{b64u:40}"),
    "algolia": ("algolia", "{hex:32}"), "sparkpost": ("sparkpost", "{hex:40}"), "postmark": ("postmark", "{uuid}"),
    "mailjet": ("mailjet", "{hex:32}"), "snyk": ("snyk", "{uuid}"), "circleci": ("circleci", "{hex:40}"),
    "codecov": ("codecov", "{uuid}"), "opsgenie": ("opsgenie", "{uuid}"), "rollbar": ("rollbar", "{hex:32}"),
    "bugsnag": ("bugsnag", "{hex:32}"), "infura": ("infura", "{hex:32}"), "etherscan": ("etherscan", "{UD:34}"),
    "binance": ("binance", "{b62:64}"), "cohere": ("cohere", "{b62:40}"), "mistral": ("mistral", "{b62:32}"),
    "deepgram": ("deepgram", "{hex:40}"), "assemblyai": ("assemblyai", "{hex:32}"), "wandb": ("wandb", "{hex:40}"),
    "linode": ("linode", "{hex:64}"), "vultr": ("vultr", "{UD:36}"), "hetzner": ("hetzner", "{b62:64}"),
    "zendesk": ("zendesk", "{b62:40}"), "trello": ("trello", "{hex:32}"), "spotify": ("spotify", "{hex:32}"),
    "pipedrive": ("pipedrive", "{hex:40}"), "mollie": ("mollie", "live_{b62:30}"), "kakao": ("kakao", "{hex:32}"),
    "plivo": ("plivo", "{b62:40}"), "jenkins": ("jenkins", "11{hex:32}"), "splunk": ("splunk", "{uuid}"),
    "meraki": ("meraki", "{hex:40}"), "gitea": ("gitea", "{hex:40}"), "together": ("together ai", "{hex:64}"),
    "ethereum": ("ethereum private key", "0x{hex:64}"), "onelogin": ("onelogin", "{hex:64}"),
}

# Generic secrets: what people use as passwords and what services issue as opaque tokens.
_WORDS = "river tiger orange castle piano falcon winter garden silver rocket maple harbor".split()


def generic_secret(rng: random.Random) -> str:
    style = rng.randrange(4)
    if style == 0:
        word = rng.choice(_WORDS)
        return word.capitalize() + str(rng.randrange(10, 9999)) + rng.choice("!@#$%&*?")
    if style == 1:
        return "".join(rng.choice(ALPHABETS["b62"] + "!@#%^&*") for _ in range(rng.randint(12, 24)))
    if style == 2:
        return "".join(rng.choice(ALPHABETS["b62"]) for _ in range(rng.randint(24, 40)))
    return rng.choice(_WORDS) + rng.choice("-_.") + rng.choice(_WORDS) + str(rng.randrange(100, 999))


# -- frames ------------------------------------------------------------------------------------------------------------
# Line shapes: {KEY} FOO_API_KEY, {camel} fooApiKey, {snake} foo_api_key, {kebab} foo-api-key, {secret}.

CONTEXT_TEMPLATES = {
    HELD_OUT: [
        'os.environ["{KEY}"] = "{secret}"',
        "{snake} = '{secret}'",
        'private static final String {KEY} = "{secret}";',
        'let {camel}: string = "{secret}";',
        "{KEY} :::= {secret}",
        '{KEY} ?= "{secret}"',
        "ENV {KEY}={secret}",
        "[default]\n{snake}={secret}",
        'config.{snake} = "{secret}"',
        '  {camel}: "{secret}",',
        'val {camel} = "{secret}"',
        '$env:{KEY} = "{secret}"',
        "set {KEY}={secret}",
        "--{kebab} {secret}",
        '{snake}: "{secret}"',
        "<add key=\"{KEY}\" value=\"{secret}\" />",
    ],
    DEV: [
        'export {KEY}="{secret}"',
        "{KEY}={secret}",
        '{snake} = "{secret}"',
        'const {camel} = "{secret}";',
        '"{camel}": "{secret}",',
        "{snake}: {secret}",
        "<{camel}>{secret}</{camel}>",
        'var {camel} string = "{secret}"',
        'System.setProperty("{KEY}", "{secret}");',
        '${camel} .= "{secret}";',
        '{KEY} ::= "{secret}"',
        '"{camel}" => "{secret}",',
        "{camel} := `{secret}`",
        "--{kebab}={secret}",
    ],
}

CHAT_FRAMES = {
    HELD_OUT: [
        "the token {secret} expires tomorrow",
        "paste this in: {secret}",
        "{secret} <- that's the prod one",
        "Ping me if {secret} stops working.",
        "new creds: {secret}, don't share",
        "I think it was '{secret}' but not sure",
    ],
    DEV: [
        "use {secret} for the deploy",
        "here's the key: {secret}",
        "I rotated it, new one is {secret} ok?",
        "can you check why {secret} gets a 401",
        "try {secret}",
        "(it's {secret})",
    ],
}

# Chat frames for families known only by their provider's name.
CONTEXT_CHAT_FRAMES = {
    HELD_OUT: ["here is the {provider} api key {secret}", "{provider} creds -> {secret}",
               "for {provider} use {secret} please"],
    DEV: ["my {provider} key is {secret}", "{provider} token: {secret}", "the {provider} secret {secret} works"],
}

# Shapes for secrets with a key that names them (no provider format): (key, template).
GENERIC_SHAPES = {
    HELD_OUT: [
        ("password", 'db.connect(host="db", password="{secret}")'),
        ("password", "Server=db;Database=app;User Id=sa;Password={secret};"),
        ("password", "mysqldump -u backup -p{secret} shop > shop.sql"),
        ("password", "sshpass -p {secret} ssh deploy@host"),
        ("password", "curl -u admin:{secret} https://ci.internal/api"),
        ("password", "amqp://guest:{secret}@mq:5672/"),
        ("secret", 'spring.datasource.password={secret}'),
        ("secret", "X-Auth-Token: {secret}"),
        ("secret", "client_secret: '{secret}'"),
        ("password", "the wifi password is {secret}"),
        ("secret", "Authorization: Basic {b64}"),
        ("secret", '{{"apiKey": "{secret}"}}'),
    ],
    DEV: [
        ("password", "password={secret}"),
        ("password", 'DB_PASSWORD="{secret}"'),
        ("password", "mysql -u root -p{secret} shop"),
        ("password", "--password {secret}"),
        ("password", "postgres://app:{secret}@db.internal:5432/main"),
        ("password", "my password is {secret}"),
        ("password", "<password>{secret}</password>"),
        ("secret", "X-Api-Key: {secret}"),
        ("secret", "Authorization: Bearer {secret}"),
        ("secret", 'System.setProperty("X_TOKEN", "{secret}")'),
        ("secret", "https://api.example.com/v1/items?access_token={secret}&page=2"),
        ("secret", "AccountKey={secret};EndpointSuffix=core.windows.net"),
        ("secret", '"xToken" => "{secret}"'),
        ("secret", "$xToken .= \"{secret}\";"),
    ],
}


@dataclasses.dataclass(frozen=True)
class Sample:
    """One secret in one text: the family it belongs to, how it is placed, and the secret itself."""

    family: str
    placement: str  # "context" (a line shape with a key) or "bare" (a chat sentence)
    split: str
    text: str
    secret: str


def _key_names(word: str) -> dict[str, str]:
    clean = "".join(char if char.isalnum() else " " for char in word).split()
    parts = [part.lower() for part in clean] + ["api", "key"]
    return {"KEY": "_".join(parts).upper(), "snake": "_".join(parts), "kebab": "-".join(parts),
            "camel": parts[0] + "".join(part.capitalize() for part in parts[1:])}


def credential_samples(split: str = DEV, seed: int = 14) -> list[Sample]:
    """Every family in every line shape and every chat frame of ``split``, with fresh synthetic secrets."""
    import base64

    rng = random.Random(f"{seed}:{split}")
    samples: list[Sample] = []
    for family, (provider, specs) in FAMILY_FORMATS.items():
        for spec in specs:
            for template in CONTEXT_TEMPLATES[split]:
                secret = spec(rng) if callable(spec) else _fill(spec, rng)
                if "\n" in secret and template.count("{secret}") and ("=" in template or ":" in template):
                    text = template.format(secret=secret, **_key_names(provider))
                else:
                    text = template.format(secret=secret, **_key_names(provider))
                samples.append(Sample(family, "context", split, text, secret))
            for frame in CHAT_FRAMES[split]:
                secret = spec(rng) if callable(spec) else _fill(spec, rng)
                samples.append(Sample(family, "bare", split, frame.format(secret=secret), secret))
    for family, (provider, spec) in CONTEXT_FORMATS.items():
        for template in CONTEXT_TEMPLATES[split]:
            secret = _fill(spec, rng)
            samples.append(Sample(family, "context", split, template.format(secret=secret, **_key_names(provider)),
                                  secret))
        for frame in CONTEXT_CHAT_FRAMES[split]:
            secret = _fill(spec, rng)
            samples.append(Sample(family, "bare", split, frame.format(secret=secret, provider=provider), secret))
    for kind, template in GENERIC_SHAPES[split]:
        for _ in range(4):
            secret = generic_secret(rng)
            if "curl -u" in template or "://" in template:
                secret = secret.replace("@", "#").replace(":", "!")
            if ";" in template or "&" in template or "?" in template:
                secret = secret.replace(";", "!").replace("&", "%").replace("#", "!")
            if "{b64}" in template:
                secret = base64.b64encode(f"admin:{secret}".encode()).decode()
                text = template.replace("{b64}", secret)
            else:
                text = template.format(secret=secret)
            samples.append(Sample("password" if kind == "password" else "generic", "context", split, text, secret))
    return samples


# -- known non-secrets -------------------------------------------------------------------------------------------------

def credential_false_positives() -> list[tuple[str, str]]:
    """``(group, text)`` pairs that hold no secret; group is ``"scanner"`` (what public scanners' users report
    as false positives: placeholders, documented examples, ordinary code and data) or ``"own"`` (our own
    placeholders and redacted text)."""
    scanner = [
        "sk_live_xxxxxxxxxxxxxxxxxxxxxxxx", "ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX", "api_key = '<your-key>'",
        "token: ${TOKEN}", "password: $DB_PASSWORD", "secret: {{ secret }}", "password: ****", "password=changeme",
        "API_KEY=your_api_key_here", "TOKEN=REPLACE_ME", "AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_access_key_id=AKIAIOSFODNN7EXAMPLE", 'api_key = os.environ["OPENAI_API_KEY"]',
        "const token = process.env.GITHUB_TOKEN;", 'password = os.getenv("DB_PASSWORD")',
        'secret := os.Getenv("SECRET")', "token = ENV['TOKEN']", 'String password = System.getenv("PW");',
        "token = get_token()", 'password = request.form["password"]', "max_tokens: 4096", "secret = self.secret",
        "if token is None:", "password_hash = bcrypt.hash(password)", "def check_password(password: str) -> bool:",
        "token_type: Bearer", "key = cache_key(user)", "auth = HTTPBasicAuth(user, pw)",
        '<input type="password" name="password">', "password: string", '"password": "string"',
        "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')", 'raise ValueError("bad token")',
        "echo $PW | docker login --password-stdin", "secret_name: prod/db",
        "token_url: https://oauth2.googleapis.com/token", "keyId: 'abc'", "api_key: null", 'password: ""',
        "password = None", "token: !vault |", "PASSWORD_MIN_LENGTH = 12", "secretKeyRef:",
        "secret_key_base: <%= ENV['SECRET'] %>",
        'DB_PASSWORD=${DB_PASSWORD:-}', "export GITHUB_TOKEN=$(gh auth token)", "password: <password>",
        "api_key: <API_KEY>", "token: '%s'", "password = f\"{prefix}{suffix}\"", "SECRET_KEY = env('SECRET_KEY')",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "md5 d41d8cd98f00b204e9800998ecf8427e", "request id 123e4567-e89b-12d3-a456-426614174000",
        '"integrity": '
        '"sha512-3c1P8bW9s2Lx0qL9k8mB8Q5F3rY1hN6vX2pZ7tG4jK0dS9aW1eR5uI7oP3lM6nB8vC2xZ4qT1yU0iO9pA5sD7f=="',
        "image: ghcr.io/acme/api@sha256:9b2e4c1f0d3a5b7e8c6d4f2a1b0c9e8d7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
        "version 1.2.3-rc.1", "released 2024-03-15T10:20:30Z", "build 20240315.1", "AbstractSingletonProxyFactoryBean",
        "getUserProfileByIdV2", "test_user_login_2024_03_15", "MyComponentV2PropsWithChildren",
        "src/components/Button/Button.test.tsx", "https://github.com/org/repo/blob/main/README.md",
        "https://docs.google.com/document/d/1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA9bL2k3m4Xq9Yp0sT1uV2wX3yZ4aB5cD6eF7gH8iJ9kL0mN1oP2qR deploy",
        "data:image/png;base64,"
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
        "my password is hard to remember", "the token economy is growing", "Password: required",
        "the bearer of bad news", "secretary: Margaret", "pass the salt, please", "keyboard shortcuts for the key",
        "see sk-8 for details", "rk-release-notes-for-the-next-big-version", "Bearer token authentication is used",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----", "postgres://user@localhost:5432/db", "redis://cache:6379/0",
        "https://user:password@example.com", "mysql -u root -p shop", "the secret to good bread is time",
        "ENCRYPTION_KEY_LENGTH=32", "tokens_per_second: 85.3", "pk_live_51HqLyjWDarjtT1zdp7dc",
        "key: value", "token_count = len(tokens)", "passphrase: ''", "private_key_path: ~/.ssh/id_ed25519",
        "x-api-key: {{apiKey}}", "Authorization: Bearer <token>", "Authorization: Bearer ${TOKEN}",
        "api_key = 'sk-...'", "OPENAI_API_KEY=sk-your-key-here", "STRIPE_KEY=sk_test_...",
        "password: !!python/name:os.environ", "auth_token = secrets.token_hex(32)",
        "session_token: undefined", "client_secret = settings.CLIENT_SECRET", "token = uuid.uuid4().hex",
    ]
    own = [
        "[credential:stripe]", "[redacted]", "password=[credential:password]", "Bearer [credential:bearer]",
        "postgres://app:[credential:url_password]@db/main", 'api_key = "[credential:generic]"',
        "use [credential:github] for the deploy", "password: \"[redacted]\"", "token=[redacted]&x=1",
        "[credential:private_key]", "Authorization: Basic [credential:http_auth]",
        "<xToken>[credential:generic]</xToken>", "mysql -u root -p[credential:password] shop",
        "x-api-key: [credential:generic]", "[credential:high_entropy] and [credential:aws]",
    ]
    return [("scanner", text) for text in scanner] + [("own", text) for text in own]


# -- personal data -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PIISample:
    kind: str
    split: str
    text: str
    value: str


_IBAN_SPECS = {"DE": "{d:18}", "GB": "NWBK{d:14}", "FR": "{d:23}", "ES": "{d:20}", "IT": "X{d:22}", "NL": "ABNA{d:10}",
               "BE": "{d:12}", "CH": "{d:17}", "AT": "{d:16}", "PL": "{d:24}", "SE": "{d:20}", "NO": "{d:11}",
               "IE": "AIBK{d:14}", "PT": "{d:21}", "DK": "{d:14}", "FI": "{d:14}"}


def iban(country: str, rng: random.Random, grouped: bool) -> str:
    bban = _fill(_IBAN_SPECS[country], rng)
    numeric = "".join(str(int(char, 36)) for char in bban + country + "00")
    check = 98 - int(numeric) % 97
    compact = f"{country}{check:02d}{bban}"
    return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4)) if grouped else compact


def luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        digits = body + check
        total = 0
        for position, char in enumerate(reversed(digits)):
            value = int(char)
            if position % 2:
                value = value * 2 - 9 if value > 4 else value * 2
            total += value
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def _group(digits: str, sizes: list[int], sep: str) -> str:
    out, index = [], 0
    for size in sizes:
        out.append(digits[index:index + size])
        index += size
    return sep.join(part for part in out if part)


# (E.164 calling code, national significant number spec, national format spec)
PHONE_COUNTRIES = {
    "US": ("1", "{d:10}", None), "UK": ("44", "7{d:9}", "07{d:3} {d:6}"), "DE": ("49", "30{d:8}", "030 {d:8}"),
    "FR": ("33", "6{d:8}", "06 {d:2} {d:2} {d:2} {d:2}"), "IN": ("91", "9{d:9}", "9{d:4} {d:5}"),
    "JP": ("81", "90{d:8}", "090-{d:4}-{d:4}"), "BR": ("55", "119{d:8}", "(11) 9{d:4}-{d:4}"),
    "CN": ("86", "138{d:8}", "138 {d:4} {d:4}"), "AU": ("61", "4{d:8}", "04{d:2} {d:3} {d:3}"),
    "IT": ("39", "3{d:9}", None), "ES": ("34", "6{d:8}", "6{d:2} {d:2} {d:2} {d:2}"),
    "MX": ("52", "55{d:8}", None), "NL": ("31", "6{d:8}", "06-{d:8}"), "SE": ("46", "70{d:7}", "070-{d:3} {d:2} {d:2}"),
    "CH": ("41", "79{d:7}", "079 {d:3} {d:2} {d:2}"), "RU": ("7", "9{d:9}", "8 (9{d:2}) {d:3}-{d:2}-{d:2}"),
    "KR": ("82", "10{d:8}", "010-{d:4}-{d:4}"), "SG": ("65", "9{d:7}", None),
    "ZA": ("27", "82{d:7}", "082 {d:3} {d:4}"),
    "NG": ("234", "803{d:7}", "0803 {d:3} {d:4}"), "IE": ("353", "87{d:7}", "087 {d:3} {d:4}"),
    "PL": ("48", "5{d:8}", None), "TR": ("90", "532{d:7}", "0532 {d:3} {d:2} {d:2}"),
    "AR": ("54", "11{d:8}", "011 {d:4}-{d:4}"), "BE": ("32", "470{d:6}", "0470 {d:2} {d:2} {d:2}"),
}

PII_FRAMES = {
    HELD_OUT: ["Reach her at {v} tomorrow.", "{v} is the one on file", "details: {v}; thanks",
               "He said '{v}' twice."],
    DEV: ["contact: {v}", "my {label} is {v}", "({v})", "send it to {v}."],
}
_LABELS = {"email": "email", "phone": "number", "iban": "IBAN", "credit_card": "card", "ssn": "SSN",
           "ip_address": "IP", "nino": "NI number"}


def _pii_values(rng: random.Random) -> list[tuple[str, str]]:
    values: list[tuple[str, str]] = []
    for local, domain in (("jane.doe", "example.com"), ("j+tag", "mail.example.co.uk"), ("BOB_99", "Example.ORG"),
                          ("josé", "exemple.fr"), ("用户", "例子.广告"), ("пользователь", "пример.рф"),
                          ('"john doe"', "example.com"), ('"very.(),:;<>[]".odd', "example.org"),
                          ("müller", "bücher.de"), ("a.b-c_d", "sub.domain.example.io")):
        values.append(("email", f"{local}@{domain}"))
    for country, (code, nsn, national) in PHONE_COUNTRIES.items():
        number = _fill(nsn, rng)
        values.append(("phone", f"+{code}{number}"))
        spaced = " ".join([number[:len(number) % 3 or 3]] + [number[i:i + 3] for i in range(len(number) % 3 or 3,
                                                                                          len(number), 3)])
        values.append(("phone", f"+{code} {spaced}"))
        if national:
            values.append(("phone", _fill(national, rng)))
    values += [("phone", "(555) 123-4567"), ("phone", "555.123.4567"), ("phone", "+44 (0)20 7946 0958"),
               ("phone", "0044 20 7946 0958"), ("phone", "020 7946 0958"), ("phone", "01 23 45 67 89")]
    for country in _IBAN_SPECS:
        values.append(("iban", iban(country, rng, grouped=rng.random() < 0.5)))
    for prefix, length, sizes in (("4", 16, [4, 4, 4, 4]), ("51", 16, [4, 4, 4, 4]), ("2221", 16, [4, 4, 4, 4]),
                                  ("34", 15, [4, 6, 5]), ("37", 15, [4, 6, 5]), ("36", 14, [4, 6, 4]),
                                  ("6011", 16, [4, 4, 4, 4]), ("3530", 16, [4, 4, 4, 4]), ("62", 19, [4, 4, 4, 4, 3]),
                                  ("4", 19, [4, 4, 4, 4, 3]), ("50", 12, [4, 4, 4]), ("6759", 18, [4, 4, 4, 4, 2])):
        digits = luhn_complete(prefix, length, rng)
        values.append(("credit_card", _group(digits, sizes, rng.choice([" ", "-"]))))
        if length in (15, 16):
            values.append(("credit_card", digits))
    for _ in range(3):
        area, group, serial = rng.randint(1, 665), rng.randint(1, 99), rng.randint(1, 9999)
        values.append(("ssn", f"{area:03d}-{group:02d}-{serial:04d}"))
    values += [("ip_address", "192.168.1.20"), ("ip_address", "8.8.4.4"),
               ("ip_address", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"), ("ip_address", "2001:db8::1"),
               ("ip_address", "fe80::1ff:fe23:4567:890a%eth0"), ("ip_address", "::ffff:192.0.2.128"),
               ("ip_address", "2001:db8::"), ("ip_address", "::1"), ("nino", "AB123456C"), ("nino", "AB 12 34 56 C"),
               ("nino", "JG 10 37 59 A")]
    return values


def pii_samples(split: str = DEV, seed: int = 14) -> list[PIISample]:
    """Personal data of every kind in the frames of ``split``, plus SSNs spelled without dashes next to a label."""
    rng = random.Random(f"pii:{seed}:{split}")
    samples = []
    for kind, value in _pii_values(rng):
        for frame in PII_FRAMES[split]:
            samples.append(PIISample(kind, split, frame.format(v=value, label=_LABELS[kind]), value))
    ssn_frames = (["SSN {v}", "social security number: {v}"] if split == DEV
                  else ["her SSN is {v}", "Social Security No. {v}"])
    for spelling in ("{a:03d} {g:02d} {s:04d}", "{a:03d}{g:02d}{s:04d}"):
        for frame in ssn_frames:
            value = spelling.format(a=rng.randint(1, 665), g=rng.randint(1, 99), s=rng.randint(1, 9999))
            samples.append(PIISample("ssn", split, frame.format(v=value), value))
    return samples


def pii_lookalikes() -> list[str]:
    """Texts with numbers and strings shaped like personal data that are not: ids, times, prices, versions."""
    return [
        "Order #100234567 shipped", "order 1234567890123456 fails Luhn", "at 2026-01-01T12:34:56.789+00:00",
        "on 12/31/2025 at 10:30:00", "price $1,234,567.89", "version 1.2.3.4.5", "release v2.10.3",
        "ISBN 978-0-306-40615-7", "ISBN 0-306-40615-2", "ISBN-10: 0306406152",
        "id 123e4567-e89b-12d3-a456-426614174000", "card ending 4242", "4111 1111 1111 1112 fails Luhn",
        "DE89 3704 0044 0532 0130 01 has a bad check", "a number like 123 45 6789 with no label",
        "ticket 123456789", "MAC 00:1A:2B:3C:4D:5E", "at 12:34:56", "std::vector<int> v;", "a[1::2]",
        "Foo::bar()", "+100 points", "zip 90210", "color #ff00ff", "51.5074, -0.1278", "1 000 000 people",
        "epoch 1700000000 and 1700000000123 ms", "call 555-1234 locally", "almost an ssn 123-45-67890",
        "mail user@localhost", "follow @jane on social", "import '@babel/core'", "git@github.com:org/repo.git",
        "icon@2x.png", "lodash@4.17.21", "not an ip: 192.168.1.256 or 999.1.1.1", "scores 100 200 3000",
        "a list 1234 5678 9012 3456 7890", "QQ 12 34 56 C is the example NINO", "BG123456A",
        "rate +5.5% and -3.2%", "between 2020-2024", "room 0.5 0.25 0.75", "timezone +05:30",
        "dated 01.02.2024", "chapter 3.14.159", "pi is 3.14159265", "2001 was a year", "invoice INV-2024-000123",
        "tracking 1Z999AA10123456784", "sha 3f786850e387550fdab836ed7e6dc881de23001b", "build 987-65-4321-rc",
        "123-45-6789-0001 is a part number", "phone extension x1234", "count 12,345,678",
    ]
