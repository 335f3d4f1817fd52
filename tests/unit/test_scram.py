"""The SCRAM server exchange and Kafka's credential format, without a network: RFC 7677's
example exchange byte for byte, refusals as failures (never exceptions), and an unknown user
answered like a known one until the proof."""

from __future__ import annotations

import base64
import random
import re

import pytest

from samsa.metadata import scram as fmt
from samsa.server.scram import SaslStep, ScramCredentials, ScramExchange
from tests.scramclient import ScramClient, expected_keys

KAFKA_MESSAGE = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
SERVER_FIRST = re.compile(rb"r=([\x21-\x2b\x2d-\x7e]+),s=([A-Za-z0-9+/=]+),i=([0-9]+)")


def creds_with(user: str, password: str, mechanism: str = "SCRAM-SHA-256", iterations: int = 4096,
               salt: bytes = b"salt-of-the-earth") -> ScramCredentials:
    creds = ScramCredentials()
    m = fmt.MECHANISMS[mechanism]
    cred = fmt.credential_from_salted(m, salt, fmt.salted_password(m, password, salt, iterations), iterations)
    creds.on_entity(f"users/{user}", {mechanism: fmt.credential_to_string(cred)})
    return creds


def exchange(creds: ScramCredentials, client: ScramClient, mechanism: str = "SCRAM-SHA-256") -> tuple[SaslStep,
                                                                                                       SaslStep | None]:
    x = ScramExchange(fmt.MECHANISMS[mechanism], creds)
    first = x.step(client.first())
    if first.failure is not None:
        return first, None
    return first, x.step(client.final(first.reply))


def test_rfc7677_example_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    import samsa.server.scram as server

    monkeypatch.setattr(server.secrets, "token_urlsafe", lambda n: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    creds = creds_with("user", "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    x = ScramExchange(fmt.SCRAM_SHA_256, creds)
    first = x.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert (first.reply, first.principal, first.failure) == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", None, None)
    final = x.step(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                   b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final.failure is None and final.principal == "User:user"
    assert final.reply == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_right_and_wrong_password(mechanism: str) -> None:
    creds = creds_with("alice", "alice-secret", mechanism, iterations=8192)
    client = ScramClient(mechanism, "alice", "alice-secret")
    first, final = exchange(creds, client, mechanism)
    assert final is not None and final.principal == "User:alice" and client.verify(final.reply)
    first, final = exchange(creds, ScramClient(mechanism, "alice", "wrong"), mechanism)
    assert first.failure is None and b",i=8192" in first.reply
    assert final is not None and final.principal is None and final.failure is not None
    assert final.message == KAFKA_MESSAGE.format(mechanism)
    assert "wrong" not in final.failure and "alice-secret" not in final.failure


def test_an_unknown_user_gets_a_normal_server_first_and_fails_like_a_wrong_password() -> None:
    creds = creds_with("alice", "alice-secret")
    known_first, known_final = exchange(creds, ScramClient("SCRAM-SHA-256", "alice", "wrong"))
    ghost_first, ghost_final = exchange(creds, ScramClient("SCRAM-SHA-256", "ghost", "whatever"))
    k, g = SERVER_FIRST.fullmatch(known_first.reply), SERVER_FIRST.fullmatch(ghost_first.reply)
    assert k is not None and g is not None and ghost_first.failure is None
    assert g.group(3) == b"4096"  # the default iterations
    fake_salt = base64.b64decode(g.group(2))
    assert re.fullmatch(rb"[0-9a-z]{20,26}", fake_salt)  # shaped as Kafka's tools make salts
    # the same name gets the same salt every time (as a real user would), another name another
    again, _ = exchange(creds, ScramClient("SCRAM-SHA-256", "ghost", "other"))
    other, _ = exchange(creds, ScramClient("SCRAM-SHA-256", "ghost2", "other"))
    assert SERVER_FIRST.fullmatch(again.reply).group(2) == g.group(2)  # type: ignore[union-attr]
    assert SERVER_FIRST.fullmatch(other.reply).group(2) != g.group(2)  # type: ignore[union-attr]
    assert known_final is not None and ghost_final is not None
    assert ghost_final.message == known_final.message and ghost_final.principal is None
    # ... and a broker with the same cluster secret answers it the same
    twin = ScramCredentials()
    twin.secret = creds.secret
    there, _ = exchange(twin, ScramClient("SCRAM-SHA-256", "ghost", "x"))
    assert SERVER_FIRST.fullmatch(there.reply).group(2) == g.group(2)  # type: ignore[union-attr]


@pytest.mark.parametrize(("first", "why"), [
    (b"p=tls-unique,,n=alice,r=abc", "channel binding"),
    (b"n,,m=ext,n=alice,r=abc", "malformed"),
    (b"n,,n=alice,r=abc,tokenauth=true", "delegation tokens"),
    (b"n,a=bob,n=alice,r=abc", "authorization id"),
    (b"n,,n=al=ice,r=abc", "malformed"),
    (b"n,,n=alice", "malformed"),
    (b"", "malformed"),
    (b"\xff\xfe", "not ASCII"),
])
def test_bad_client_first_messages_fail(first: bytes, why: str) -> None:
    step = ScramExchange(fmt.SCRAM_SHA_256, creds_with("alice", "pw")).step(first)
    assert step.failure is not None and why in step.failure and step.principal is None


def test_authzid_equal_to_the_user_and_escaped_names() -> None:
    creds = creds_with("a,b=c", "pw")
    client = ScramClient("SCRAM-SHA-256", "a,b=c", "pw", gs2="n,a=a=2Cb=3Dc,")
    _, final = exchange(creds, client)
    assert final is not None and final.principal == "User:a,b=c"


def test_a_nonce_that_ends_with_ours_is_accepted_as_kafka_does() -> None:
    """librdkafka 2.0 (Debian's, kcat's) sends its client nonce twice in the client-final message."""
    creds = creds_with("alice", "pw")
    c = ScramClient("SCRAM-SHA-256", "alice", "pw")
    x = ScramExchange(fmt.SCRAM_SHA_256, creds)
    final = x.step(c.final(x.step(c.first()).reply, nonce_prefix=c.nonce))
    assert final.principal == "User:alice" and c.verify(final.reply)
    x = ScramExchange(fmt.SCRAM_SHA_256, creds)
    first = x.step(c.first()).reply
    assert x.step(c.final(first).replace(b",r=" + c.nonce.encode(), b",r=" + c.nonce.encode()[:-1])).failure


def test_bad_client_final_messages_fail() -> None:
    creds = creds_with("alice", "pw")

    def final_after(mangle: bytes) -> SaslStep:
        c = ScramClient("SCRAM-SHA-256", "alice", "pw")
        x = ScramExchange(fmt.SCRAM_SHA_256, creds)
        good = c.final(x.step(c.first()).reply)
        return x.step(mangle.replace(b"GOOD", good) if b"GOOD" in mangle else mangle)

    assert final_after(b"GOOD").principal == "User:alice"  # (unmangled, it passes)
    for bad in (b"garbage", b"c=biws,r=other,p=AAAA", b"GOOD,extra", b"c=eSws,r=x,p=AAAA", b"\x00" * 40):
        step = final_after(bad)
        assert step.failure is not None and step.principal is None, bad
    c = ScramClient("SCRAM-SHA-256", "alice", "pw")  # the channel binding must repeat the gs2 header
    x = ScramExchange(fmt.SCRAM_SHA_256, creds)
    good = c.final(x.step(c.first()).reply)
    assert x.step(good.replace(b"c=biws", b"c=eSws")).failure is not None
    assert x.step(good).failure is not None  # nothing after the end


def test_random_bytes_never_raise() -> None:
    rng = random.Random(17)
    creds = creds_with("alice", "pw")
    for _ in range(2000):
        x = ScramExchange(fmt.SCRAM_SHA_512, creds)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(60)))
        prefix = rng.choice([b"", b"n,,n=alice,r=", b"n,,n=ghost,r=x", b"c=biws,r="])
        step = x.step(prefix + junk)
        x.step(b"c=biws,r=" + junk + b",p=" + base64.b64encode(junk))
        assert isinstance(step, SaslStep)


def test_credential_strings_in_kafkas_format() -> None:
    cred = fmt.credential_from_salted(fmt.SCRAM_SHA_512, b"NaCl", b"\x01" * 64, 4096)
    text = fmt.credential_to_string(cred)
    assert re.fullmatch(r"salt=TmFDbA==,stored_key=[A-Za-z0-9+/=]{88},server_key=[A-Za-z0-9+/=]{88},iterations=4096",
                        text)
    assert fmt.credential_from_string(text) == cred
    stored, server = expected_keys("SCRAM-SHA-256", "secret", b"salty", 4096)
    mine = fmt.new_credential(fmt.SCRAM_SHA_256, "secret", 4096)
    assert (mine.stored_key, mine.server_key) != (stored, server)  # a random salt of its own
    assert expected_keys("SCRAM-SHA-256", "secret", mine.salt, 4096) == (mine.stored_key, mine.server_key)
    for bad in ("", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
                "salt=!!,stored_key=AA==,server_key=AA==,iterations=1", text + ",extra=1"):
        with pytest.raises(ValueError):
            fmt.credential_from_string(bad)


def test_the_cache_follows_entity_configs() -> None:
    creds = creds_with("alice", "pw")
    assert creds.get("SCRAM-SHA-256", "alice") is not None and creds.get("SCRAM-SHA-512", "alice") is None
    creds.on_entity("users/alice/clients/app", {})  # not a user's own config: ignored
    assert creds.get("SCRAM-SHA-256", "alice") is not None
    creds.on_entity("users/alice", {"SCRAM-SHA-256": "garbage", "producer_byte_rate": "10"})
    assert creds.get("SCRAM-SHA-256", "alice") is None  # a malformed credential logs nobody in
    creds.on_entity("users/bob%40example.com", {"SCRAM-SHA-512": fmt.credential_to_string(
        fmt.credential_from_salted(fmt.SCRAM_SHA_512, b"s", b"k" * 64, 4096))})
    assert creds.get("SCRAM-SHA-512", "bob@example.com") is not None
    creds.on_entity("users/bob%40example.com", {})
    assert creds.get("SCRAM-SHA-512", "bob@example.com") is None
