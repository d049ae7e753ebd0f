"""Gregor's own broker requests authenticate as the clients do: SCRAM
checked against RFC 7677's example, and one line for what it cannot do."""

from __future__ import annotations

import pytest

from ground.errors import GregorError
from harness.systems import secure_link


def test_scram_sha_256_matches_rfc_7677():
    scram = secure_link.Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert scram.client_first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert scram.client_final(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    scram.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_scram_refuses_a_wrong_server_signature_and_a_foreign_nonce():
    scram = secure_link.Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    scram.client_final(b"r=rOprNGfwEbeRWgbNEkqO%x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(GregorError, match="signature does not match"):
        scram.verify(b"v=AAAA")
    with pytest.raises(GregorError, match="nonce"):
        secure_link.Scram("SCRAM-SHA-512", "u", "p", nonce="abc").client_final(b"r=xyz,s=AAAA,i=4096")


def test_unknown_protocol_and_mechanism_get_one_line():
    with pytest.raises(GregorError, match="unknown security.protocol 'TLS'"):
        secure_link.protocol_of({"security.protocol": "TLS"})
    with pytest.raises(GregorError, match="cannot authenticate with sasl.mechanism GSSAPI"):
        secure_link.mechanism_of({"security.protocol": "SASL_SSL"})
    assert secure_link.mechanism_of({"sasl.mechanisms": "scram-sha-512"}) == "SCRAM-SHA-512"
    assert secure_link.protocol_of(None) == "PLAINTEXT"
