"""TLS for the pair fixtures (Python's ssl module, nothing of chaos's own code): --tls-cert on a server,
--tls-ca (and --server-name) on a client; neither: cleartext.

For captures decrypted offline (`chaos audit --keylog`), either end can also take:
  --keylog FILE                 write the session secrets to FILE (NSS key log, SSLContext.keylog_filename)
  --tls-version 1.2|1.3         pin the version (minimum and maximum)
  --tls-cipher aes128|aes256|chacha20
                                the only cipher offered or accepted: for TLS 1.2 the ECDHE suites with that cipher
                                (set_ciphers), for TLS 1.3 TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 or
                                TLS_CHACHA20_POLY1305_SHA256. Python 3.11's ssl has no set_ciphersuites, so a TLS 1.3
                                suite is set by an OPENSSL_CONF file (ssl_conf, system_default, Ciphersuites): prepare()
                                writes it and runs the script again with it in the environment, before OpenSSL starts.
Without them a context is what it always was.
"""
import os
import ssl
import sys
import tempfile

# --tls-cipher: the TLS 1.2 cipher string and the TLS 1.3 suite.
TLS12_CIPHERS = {"aes128": "ECDHE+AESGCM+AES128", "aes256": "ECDHE+AESGCM+AES256", "chacha20": "ECDHE+CHACHA20"}
TLS13_SUITES = {"aes128": "TLS_AES_128_GCM_SHA256", "aes256": "TLS_AES_256_GCM_SHA384",
                "chacha20": "TLS_CHACHA20_POLY1305_SHA256"}


def pin(context, args):
    """Applies --keylog, --tls-version and --tls-cipher (TLS 1.2's part; prepare() did TLS 1.3's) to a context."""
    if getattr(args, "keylog", None):
        context.keylog_filename = args.keylog
    version = getattr(args, "tls_version", None)
    if version:
        pinned = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
        context.minimum_version = context.maximum_version = pinned
    cipher = getattr(args, "tls_cipher", None)
    if cipher:
        context.set_ciphers(TLS12_CIPHERS[cipher])
    return context


def server_tls(args, alpn=None):
    """The server's TLS context (its own certificate), or None for cleartext."""
    if not args.tls_cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.tls_cert)
    if alpn:
        context.set_alpn_protocols(alpn)
    return pin(context, args)


def client_tls(args, alpn=None):
    """The client's TLS context (trusting --tls-ca: chaos's CA when it goes through chaos), or None."""
    if not args.tls_ca:
        return None
    context = ssl.create_default_context(cafile=args.tls_ca)
    if alpn:
        context.set_alpn_protocols(alpn)
    return pin(context, args)


def add_arguments(parser):
    parser.add_argument("--tls-cert", help="server: speak TLS with this PEM (key and certificate chain)")
    parser.add_argument("--tls-ca", help="client: speak TLS, trusting this CA file")
    parser.add_argument("--server-name", default="localhost", help="client: the TLS server name (SNI) asked for")
    parser.add_argument("--keylog", help="write the TLS session secrets to this NSS key log file")
    parser.add_argument("--tls-version", choices=["1.2", "1.3"], help="pin the TLS version")
    parser.add_argument("--tls-cipher", choices=sorted(TLS12_CIPHERS), help="the only cipher: ECDHE+it (1.2), its suite (1.3)")


def prepare(args):
    """Call right after parsing: for a TLS 1.3 suite (--tls-cipher without --tls-version 1.2), runs this script again
    (same pid, same arguments) with an OPENSSL_CONF that allows only that suite, unless it is already in force."""
    cipher = getattr(args, "tls_cipher", None)
    if not cipher or getattr(args, "tls_version", None) == "1.2":
        return
    suite = TLS13_SUITES[cipher]
    if os.environ.get("PAIR_TLS_SUITE") == suite:
        return
    path = os.path.join(tempfile.gettempdir(), f"pair-tls-{suite}.cnf")
    text = ("openssl_conf = openssl_init\n[openssl_init]\nssl_conf = ssl_sect\n[ssl_sect]\n"
            "system_default = system_default_sect\n[system_default_sect]\n"
            f"Ciphersuites = {suite}\n")
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w") as handle:
        handle.write(text)
    os.replace(partial, path)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, OPENSSL_CONF=path, PAIR_TLS_SUITE=suite))


def split_pem(path):
    """A PEM file of a private key and a certificate chain (trustme's), as grpc wants them: the key, then the chain."""
    text = open(path, "rb").read()
    begin = text.index(b"-----BEGIN CERTIFICATE-----")
    return text[:begin], text[begin:]
