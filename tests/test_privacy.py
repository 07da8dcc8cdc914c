"""PII placeholders and credential guards: ``PIIRedactor`` and ``CredentialDetectedError``.

Spec (issue 4, item 4; reference section 7): PII (email, US phone, SSN, card, IPv4) is rewritten, never
refused: ``redact`` gives numbered placeholders, ``anonymize_summary`` gives kinds. Credentials are cut by
``redact_credentials``, refused by ``reject_credentials`` (a message naming the kind, never the secret) and
named by ``find_credentials``. ``scrub_for_llm`` removes credentials, anonymizes PII, then fails closed.
"""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kumiho_memory as km

PROPERTY = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def redactor() -> km.PIIRedactor:
    return km.PIIRedactor()


# -- PII ------------------------------------------------------------------------------------------------------

PII_POSITIVES = [
    ("EMAIL", "jane.doe@example.com"),
    ("EMAIL", "j+tag@mail.example.co.uk"),
    ("EMAIL", "BOB_99@Example.ORG"),
    ("EMAIL", "josé@example.org"),
    ("PHONE", "555-123-4567"),
    ("PHONE", "(555) 123-4567"),
    ("PHONE", "(555)123-4567"),
    ("PHONE", "555.123.4567"),
    ("PHONE", "212 555 0100"),
    ("PHONE", "+1 555-123-4567"),
    ("PHONE", "+1 (555) 123-4567"),
    ("PHONE", "1-800-555-0199"),
    ("PHONE", "+15551234567"),
    ("SSN", "123-45-6789"),
    ("CREDIT_CARD", "4111 1111 1111 1111"),
    ("CREDIT_CARD", "4111-1111-1111-1111"),
    ("CREDIT_CARD", "4111 1111 1111 1111"),
    ("CREDIT_CARD", "3782 822463 10005"),
    ("CREDIT_CARD", "3782-822463-10005"),
    ("CREDIT_CARD", "4111111111111111"),
    ("CREDIT_CARD", "5500000000000004"),
    ("IP_ADDRESS", "192.168.1.1"),
    ("IP_ADDRESS", "10.0.0.255"),
    ("IP_ADDRESS", "8.8.8.8"),
    ("IP_ADDRESS", "255.255.255.255"),
    ("IP_ADDRESS", "0.0.0.0"),
]

PII_NEGATIVES = [
    "version 1.2.3 shipped",
    "release 1.2.3.4.5 is out",
    "due 2026-01-01",
    "at 2026-01-01T12:34:56Z",
    "at 2026-01-01T12:34:56.789+00:00 exactly",
    "on 12/31/2025 at 10:30:00",
    "pi is 3.14159265",
    "epoch 1700000000 and 1700000000123 ms",
    "order 1234567890123456 fails Luhn",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "not an ip: 192.168.1.256 or 999.1.1.1 or 01.02.03.04",
    "only twelve digits 4111 1111 1111",
    "a list 1234 5678 9012 3456 7890",
    "scores 100 200 3000",
    "call 555-1234 locally",
    "almost an ssn 123-45-67890",
    "mail user@localhost",
    "kref://CognitiveMemory/prefs/ui-theme-1a2b.memory?r=1",
    "price $1,234,567.89",
    "",
]


@pytest.mark.parametrize("kind, value", PII_POSITIVES)
@pytest.mark.parametrize("template", ["{}", "before {} after", "({})", "see {}.", "\"{}\","])
def test_redact_replaces_each_kind_of_pii(redactor, kind, value, template):
    assert redactor.redact_text(template.format(value)) == template.format(f"[{kind}_001]")


@pytest.mark.parametrize("kind, value", PII_POSITIVES)
def test_anonymize_summary_names_the_kind(redactor, kind, value):
    assert redactor.anonymize_summary(f"x {value} y") == f"x [{kind.lower()}] y"


@pytest.mark.parametrize("text", PII_NEGATIVES)
def test_ordinary_numbers_dates_versions_and_ids_are_not_pii(redactor, text):
    assert redactor.redact_text(text) == text
    assert redactor.anonymize_summary(text) == text


def test_placeholders_are_numbered_per_kind_and_stable_within_a_call(redactor):
    text = ("a@x.com wrote to b@x.com from 10.0.0.1; A@X.COM again; call 555-123-4567 or (555) 123-4567 "
            "or +1 555.123.4567; fax 555-987-6543; b@x.com from 10.0.0.2")
    assert redactor.redact_text(text) == (
        "[EMAIL_001] wrote to [EMAIL_002] from [IP_ADDRESS_001]; [EMAIL_001] again; call [PHONE_001] or "
        "[PHONE_001] or [PHONE_001]; fax [PHONE_002]; [EMAIL_002] from [IP_ADDRESS_002]")


def test_numbering_continues_across_calls_on_one_instance_and_restarts_on_a_new_one(redactor):
    # upstream's shape: (text, entities); one instance is one conversation's numbering
    assert redactor.redact("b@x.com") == ("[EMAIL_001]", {"[EMAIL_001]": "b@x.com"})
    assert redactor.redact_text("c@x.com and B@X.COM") == "[EMAIL_002] and [EMAIL_001]"
    assert km.PIIRedactor().redact_text("c@x.com") == "[EMAIL_001]"


def test_numbering_continues_after_placeholders_already_in_the_text(redactor):
    # Two different people must never share a number, even when the text was partly redacted before.
    assert redactor.redact_text("[EMAIL_001] met new@x.com; [PHONE_007]") == "[EMAIL_001] met [EMAIL_002]; [PHONE_007]"
    assert redactor.redact_text("[PHONE_007] and 555-123-4567") == "[PHONE_007] and [PHONE_008]"


def test_pii_next_to_other_pii_is_all_removed(redactor):
    # Removing one match can expose a neighbour that its edge was hiding; nothing recognisable may remain.
    # Here the second number is fenced off by the first one's last digit until the first becomes a placeholder.
    text = "555-123-4567(555) 987-6543"
    assert redactor.redact_text(text) == "[PHONE_001][PHONE_002]"
    assert redactor.anonymize_summary(text) == "[phone][phone]"


def test_overlaps_go_to_the_leftmost_match(redactor):
    assert redactor.redact_text("mail 555-123-4567@example.com") == "mail [EMAIL_001]"


# -- credentials ------------------------------------------------------------------------------------------

AWS = "an AWS access key id"
BEARER = "a bearer token"
PREFIXED = "an API key with an sk-/pk-/rk-/ak- prefix"
JWT = "a JSON Web Token"
GOOGLE = "a Google API key"
SLACK = "a Slack token"
PEM = "a private key (PEM block)"
GITHUB = "a GitHub token"
DB_URL = "a database URL with an inline password"
ASSIGNED = "a password or secret assigned to a field"
# what each row's kind is reported as: the provider when the format says it, else the kind of field
LABELS = {AWS: {AWS}, BEARER: {BEARER}, PREFIXED: {PREFIXED, "an OpenAI API key"}, JWT: {JWT}, GOOGLE: {GOOGLE},
          SLACK: {SLACK}, PEM: {"a private key"},
          GITHUB: {"a GitHub fine-grained token", "a random-looking token", "a GitHub token",
                   "a GitHub personal access token"},
          DB_URL: {"a password in a URL"}, ASSIGNED: {"a password", "a secret assigned to a credential field"}}

_JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
_PEM_BODY = "MIIEpAIBAAKCAQEA7bq98cF3kQ2hZ1x\nq9Vd0s8Lk3Jd7Fq2Wm5Zr1Tt4Xy"

# (kind, text, secret): the secret is what must vanish from redacted text and never appear in a message.
CREDENTIAL_POSITIVES = [
    (AWS, "key AKIA2KX7QZ4HJ5WMN3PB here", "AKIA2KX7QZ4HJ5WMN3PB"),
    (AWS, "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    (AWS, "ABIA1234567890ABCDEF,", "ABIA1234567890ABCDEF"),
    (AWS, "(ACCAZZZZ9999YYYY8888)", "ACCAZZZZ9999YYYY8888"),
    (BEARER, "Authorization: Bearer 4f9a1c2e8b7d6a5f", "4f9a1c2e8b7d6a5f"),
    (BEARER, "header bearer QwErTyUiOpAsDfGhJkLzXcVb", "QwErTyUiOpAsDfGhJkLzXcVb"),
    (BEARER, "Bearer abc123def456ghi789=.", "abc123def456ghi789="),
    (PREFIXED, "OPENAI_KEY sk-proj-4f9a1c2e8b7d6a5f3e2d1c0b", "proj-4f9a1c2e8b7d6a5f3e2d1c0b"),
    (PREFIXED, "pk-live_Xy7Qw2Er5Ty8Ui1Op4As", "live_Xy7Qw2Er5Ty8Ui1Op4As"),
    (PREFIXED, "rk-AbCdEfGhIjKlMnOpQrStUv", "AbCdEfGhIjKlMnOpQrStUv"),
    (PREFIXED, "use ak-9z8y7x6w5v4u3t2s1r0q.", "9z8y7x6w5v4u3t2s1r0q"),
    (JWT, f"token {_JWT} end", _JWT),
    (GOOGLE, "maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    (SLACK, "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "1234567890123-AbCdEfGhIjKl"),
    (SLACK, "xoxp-9876543210-zyxwvutsrq", "9876543210-zyxwvutsrq"),
    (PEM, f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----", _PEM_BODY),
    (PEM, f"-----BEGIN PRIVATE KEY-----\n{_PEM_BODY}", _PEM_BODY),
    (PEM, f"-----BEGIN OPENSSH PRIVATE KEY-----\n{_PEM_BODY}\n-----END OPENSSH PRIVATE KEY-----", _PEM_BODY),
    (PEM, f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{_PEM_BODY}\n-----END PGP PRIVATE KEY BLOCK-----", _PEM_BODY),
    (PEM, f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{_PEM_BODY}\n-----END ENCRYPTED PRIVATE KEY-----", _PEM_BODY),
    (GITHUB, "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"),
    (GITHUB, "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789_abcdefghijklmnop"),
    (DB_URL, "postgres://app:s3cr3tPass@db.internal:5432/main", "s3cr3tPass"),
    (DB_URL, "postgresql://app:Zq8-Wv4!@localhost/main", "Zq8-Wv4!"),
    (DB_URL, "postgresql+psycopg2://app:pw9876543@db/main", "pw9876543"),
    (DB_URL, "mysql://root:MyRootPw77@127.0.0.1:3306/shop", "MyRootPw77"),
    (DB_URL, "mongodb+srv://svc:MongoPw55x@cluster0.ab1cd.mongodb.net/app", "MongoPw55x"),
    (DB_URL, "mongodb://svc:MongoPw55y@mongo:27017", "MongoPw55y"),
    (DB_URL, "redis://:RedisPw4321@cache:6379/0", "RedisPw4321"),
    (DB_URL, "rediss://default:Upstash99pw@eu1.upstash.io:6379", "Upstash99pw"),
    (DB_URL, "amqp://guest:RabbitPw12@mq:5672/", "RabbitPw12"),
    (DB_URL, "amqps://guest:RabbitPw34@mq:5671/", "RabbitPw34"),
    (ASSIGNED, "password=hunter2hunter2", "hunter2hunter2"),
    (ASSIGNED, "passwd: Tr0ub4dor&3", "Tr0ub4dor&3"),
    (ASSIGNED, "{\"password\": \"correct horse battery\"}", "correct horse battery"),
    (ASSIGNED, "api_key='abcdefgh'", "abcdefgh"),
    (ASSIGNED, "apikey: zx81spectrum48k", "zx81spectrum48k"),
    (ASSIGNED, "x-api-key: 7d9f0c2a4b6e8d1f", "7d9f0c2a4b6e8d1f"),
    (ASSIGNED, "client_secret = \"QmFzZTY0U2VjcmV0\"", "QmFzZTY0U2VjcmV0"),
    (ASSIGNED, "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8s2VtKq", "wJalrXUtnFEMI/K7MDENG"),
    (ASSIGNED, "DB_PASSWORD=P@55w0rd!x", "P@55w0rd!x"),
    (ASSIGNED, "access_token: ya29.a0AfH6SMBx1", "ya29.a0AfH6SMBx1"),
    (ASSIGNED, "accessToken=0a1b2c3d4e5f6a7b", "0a1b2c3d4e5f6a7b"),
    (ASSIGNED, "credentials: svc:Pa55word99", "svc:Pa55word99"),
    (ASSIGNED, "my wifi password: correcthorsebatterystaple.", "correcthorsebatterystaple"),
    (ASSIGNED, "https://api.example.com/v1?token=f00dbabe1234&x=1", "f00dbabe1234"),
    (ASSIGNED, "if password == 'letmein123':", "letmein123"),
]

CREDENTIAL_NEGATIVES = [
    "my password is hard to remember",
    "the token economy is growing",
    "see sk-8 for details",
    "ask-me-anything-about-the-release-schedule",
    "rk-release-notes-for-the-next-big-version",
    "kref://CognitiveMemory/prefs/ui-theme-1a2b.memory?r=1&a=token",
    "on 2026-01-01T00:00:00Z",
    "https://example.com/path?q=1&page=2",
    "postgres://user@localhost:5432/db",
    "redis://cache:6379/0",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "Password: required",
    "password: ********",
    "password: \"[redacted]\"",
    "password: $DB_PASSWORD",
    "password=${DB_PASSWORD}",
    "max_tokens: 4096 and max_tokens=100000000",
    "tokenizer: bert-base-uncased",
    "secretary: Margaret Thatcher",
    "the bearer of bad news",
    "token = get_token()",
    "api_key = os.environ['OPENAI_API_KEY']",
    "AKIA alone, AIza short, xoxb-1, ghp_short",
    "eyJhbGciOiJIUzI1NiJ9 is only a header",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "sk-" + "a" * 10,
    "",
]


@pytest.mark.parametrize("kind, text, secret", CREDENTIAL_POSITIVES)
def test_each_credential_is_found_by_kind(redactor, kind, text, secret):
    assert set(redactor.find_credentials(text)) <= LABELS[kind] and redactor.find_credentials(text)


@pytest.mark.parametrize("kind, text, secret", CREDENTIAL_POSITIVES)
def test_each_credential_is_redacted(redactor, kind, text, secret):
    redacted = redactor.strip_credentials(text)
    assert secret not in redacted
    assert "[credential:" in redacted
    assert redactor.redact_credentials(text) == (redacted, redacted.count("[credential:"))
    assert redactor.find_credentials(redacted) == []


@pytest.mark.parametrize("kind, text, secret", CREDENTIAL_POSITIVES)
def test_rejection_names_the_kind_and_never_the_secret(redactor, kind, text, secret):
    with pytest.raises(km.CredentialDetectedError) as caught:
        redactor.reject_credentials(f"summary: {text}")
    error = caught.value
    assert error.kinds and set(error.kinds) <= LABELS[kind] and all(label in str(error) for label in error.kinds)
    shown = str(error) + repr(error) + repr(error.args)
    for start in range(len(secret) - 4):
        assert secret[start:start + 5] not in shown


@pytest.mark.parametrize("text", CREDENTIAL_NEGATIVES)
def test_ordinary_text_is_not_a_credential(redactor, text):
    assert redactor.find_credentials(text) == []
    assert redactor.strip_credentials(text) == text
    assert redactor.reject_credentials(text) is None


def test_labels_survive_so_redacted_text_stays_readable(redactor):
    assert redactor.strip_credentials("Authorization: Bearer 4f9a1c2e8b7d6a5f") == \
        "Authorization: Bearer [credential:bearer]"
    assert redactor.strip_credentials('{"password": "hunter2hunter2"}') == '{"password": "[credential:password]"}'
    assert redactor.strip_credentials("postgres://app:s3cr3tPass@db/main") == \
        "postgres://app:[credential:url_password]@db/main"
    assert redactor.strip_credentials("token=f00dbabe1234&x=1") == "token=[credential:generic]"   # no ?: all of it
    assert redactor.strip_credentials("https://h/p?token=f00dbabe1234&x=1") \
        == "https://h/p?token=[credential:generic]&x=1"


def test_a_private_key_block_goes_whole_up_to_its_end_line(redactor):
    text = f"before\n-----BEGIN EC PRIVATE KEY-----\n{_PEM_BODY}\n-----END EC PRIVATE KEY-----\nafter"
    assert redactor.strip_credentials(text) == "before\n[credential:private_key]\nafter"


def test_a_cut_off_private_key_goes_to_the_end_of_the_text(redactor):
    text = f"before\n-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\nwhatever follows"
    assert redactor.strip_credentials(text) == "before\n[credential:private_key]"


def test_find_credentials_lists_each_kind_once(redactor):
    text = "AKIA2KX7QZ4HJ5WMN3PB AKIAIOSFODNN7EXAMPL2 password=hunter2hunter2"
    assert redactor.find_credentials(text) == [AWS, "a password"]


def test_rejection_lists_every_kind_found(redactor):
    with pytest.raises(km.CredentialDetectedError) as caught:
        # a valid checksum
        redactor.reject_credentials("AKIA2KX7QZ4HJ5WMN3PB and 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")
    assert caught.value.kinds == (AWS, "a GitHub token")


def test_the_error_is_a_value_error_in_our_hierarchy_and_pickles_with_its_kinds():
    assert issubclass(km.CredentialDetectedError, km.KumihoMemoryError)
    assert issubclass(km.CredentialDetectedError, ValueError)
    error = km.CredentialDetectedError("text holds an AWS access key id", [AWS])
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error) and copy.kinds == (AWS,)


# -- scrub_for_llm ----------------------------------------------------------------------------------------

def test_scrub_removes_credentials_then_anonymizes_pii(redactor):
    text = ("Jane (jane@example.com, 555-123-4567) pasted postgres://app:s3cr3tPass@db.example.com/main "
            "and key AKIA2KX7QZ4HJ5WMN3PB from 10.0.0.1")
    assert redactor.scrub_for_llm(text) == (
        "Jane ([email], [phone]) pasted postgres://app:[credential:url_password]@db.example.com/main and key "
        "[credential:aws] from [ip_address]")


def test_scrub_leaves_clean_text_alone(redactor):
    text = "We agreed to ship v1.2.3 on 2026-01-01; the token economy is fine."
    assert redactor.scrub_for_llm(text) == text


class _LeakyRedactor(km.PIIRedactor):
    """A redactor whose removal step misses everything, as a future pattern bug might."""

    def strip_credentials(self, text: str) -> str:
        return text


def test_scrub_fails_closed_when_a_credential_survives_removal():
    assert _LeakyRedactor().scrub_for_llm("note AKIA2KX7QZ4HJ5WMN3PB for jane@example.com") == "[credential:generic]"


@pytest.mark.parametrize("kind, text, secret", CREDENTIAL_POSITIVES)
def test_scrub_never_leaks_a_secret_even_when_removal_misses_it(kind, text, secret):
    # Either the whole text is withheld, or anonymizing happened to swallow the secret (a password inside
    # what looks like an email address); a surviving secret is never sent.
    scrubbed = _LeakyRedactor().scrub_for_llm(f"note {text} jane@example.com")
    assert secret not in scrubbed
    assert scrubbed == "[credential:generic]" or kind == DB_URL


def test_redaction_that_does_not_settle_withholds_the_whole_text(redactor, monkeypatch):
    # With one pass allowed, the pass that confirms nothing is left never runs: the text must be withheld.
    monkeypatch.setattr(km, "_MAX_REWRITE_PASSES", 1)
    assert redactor.strip_credentials("key AKIA2KX7QZ4HJ5WMN3PB") == "[credential:generic]"
    assert redactor.scrub_for_llm("key AKIA2KX7QZ4HJ5WMN3PB") == "[credential:generic]"


@pytest.mark.parametrize("method", ["redact", "redact_text", "anonymize_summary", "redact_credentials",
                                    "strip_credentials", "reject_credentials",
                                    "find_credentials", "scrub_for_llm"])
@pytest.mark.parametrize("value", [None, b"a@b.com", 42, ["x"]])
def test_non_strings_are_refused(redactor, method, value):
    with pytest.raises(km.InvalidArgumentError):
        getattr(redactor, method)(value)


# -- properties -------------------------------------------------------------------------------------------

_FRAGMENTS = ([value for _, value in PII_POSITIVES] + [text for _, text, _ in CREDENTIAL_POSITIVES]
              + CREDENTIAL_NEGATIVES + PII_NEGATIVES
              + ["@", ".", "-", " ", "\n", ":", "=", "'", '"', "(", ")", "[", "]", "+1", "1", "555", "4111",
                 "[EMAIL_001]", "[PHONE_002]", "[redacted]", "[email]", "Bearer ", "password=", "token: ",
                 "sk-", "AKIA", "eyJ", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
                 "postgres://", "a:", "example.com", "1.2.3.", "0123456789"])
TEXTS = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=12).map("".join)


@PROPERTY
@given(TEXTS)
@example("555-123-4567(555) 123-4567")
@example("password=\"[redacted]x\" password='[redacted]'")
def test_rewrites_never_raise_and_are_idempotent(text):
    redactor = km.PIIRedactor()
    for rewrite in (km.PIIRedactor().redact_text, redactor.anonymize_summary, redactor.strip_credentials,
                    redactor.scrub_for_llm):
        once = rewrite(text)
        assert isinstance(once, str)
        assert rewrite(once) == once, rewrite.__name__


@PROPERTY
@given(TEXTS)
def test_no_credential_survives_redaction_or_scrubbing(text):
    redactor = km.PIIRedactor()
    assert redactor.find_credentials(redactor.strip_credentials(text)) == []
    scrubbed = redactor.scrub_for_llm(text)
    assert redactor.find_credentials(scrubbed) == []
    redactor.reject_credentials(scrubbed)


@PROPERTY
@given(TEXTS)
def test_no_pii_survives_redaction(text):
    redactor = km.PIIRedactor()
    redacted = redactor.redact_text(text)
    assert redactor.anonymize_summary(redacted) == redacted
    anonymized = redactor.anonymize_summary(text)
    assert redactor.redact_text(anonymized) == anonymized


@PROPERTY
@given(st.text(max_size=200))
def test_arbitrary_unicode_is_handled(text):
    redactor = km.PIIRedactor()
    redactor.redact_text(text)
    redactor.anonymize_summary(text)
    redactor.find_credentials(text)
    assert redactor.find_credentials(redactor.scrub_for_llm(text)) == []


@pytest.mark.parametrize("text", ["a" * 50_000, "1." * 25_000, "x@" * 25_000, "a@b." * 12_000, "1 " * 25_000,
                                  "password=" * 5_000, "token" * 10_000, "eyJa." * 10_000, "Bearer " * 7_000,
                                  "postgres://a:" * 4_000, "(" * 50_000, "-----BEGIN RSA PRIVATE KEY-----" * 1_000])
def test_long_repetitive_text_is_handled(redactor, text):
    # Regression guard for catastrophic backtracking: each of these finishes in milliseconds when linear.
    assert redactor.find_credentials(redactor.scrub_for_llm(text)) == []
    redacted = redactor.redact_text(text)
    assert redactor.anonymize_summary(redacted) == redacted
