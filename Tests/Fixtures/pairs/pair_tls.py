"""TLS for the pair fixtures (Python's ssl module, nothing of chaos's own code): --tls-cert on a server,
--tls-ca (and --server-name) on a client; neither: cleartext."""
import ssl


def server_tls(args):
    """The server's TLS context (its own certificate), or None for cleartext."""
    if not args.tls_cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.tls_cert)
    return context


def client_tls(args, alpn=None):
    """The client's TLS context (trusting --tls-ca: chaos's CA when it goes through chaos), or None."""
    if not args.tls_ca:
        return None
    context = ssl.create_default_context(cafile=args.tls_ca)
    if alpn:
        context.set_alpn_protocols(alpn)
    return context


def add_arguments(parser):
    parser.add_argument("--tls-cert", help="server: speak TLS with this PEM (key and certificate chain)")
    parser.add_argument("--tls-ca", help="client: speak TLS, trusting this CA file")
    parser.add_argument("--server-name", default="localhost", help="client: the TLS server name (SNI) asked for")


def split_pem(path):
    """A PEM file of a private key and a certificate chain (trustme's), as grpc wants them: the key, then the chain."""
    text = open(path, "rb").read()
    begin = text.index(b"-----BEGIN CERTIFICATE-----")
    return text[:begin], text[begin:]
