#!/usr/bin/env python3
"""Certificates for TLS pair tests, made with PyPI's trustme (nothing of chaos's own code): a CA of the upstream's
own, and a server certificate for localhost and 127.0.0.1 signed by it.

  test_certs.py DIR  ->  DIR/upstream-ca.pem, DIR/server.pem (key and chain), DIR/client.pem (a client certificate
                         from the same CA, key and chain, for an upstream that requires one)
"""
import os
import sys

import trustme

directory = sys.argv[1]
os.makedirs(directory, exist_ok=True)
ca = trustme.CA()
ca.cert_pem.write_to_path(os.path.join(directory, "upstream-ca.pem"))
ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(os.path.join(directory, "server.pem"))
ca.issue_cert("chaos-client@example.test").private_key_and_cert_chain_pem.write_to_path(os.path.join(directory, "client.pem"))
