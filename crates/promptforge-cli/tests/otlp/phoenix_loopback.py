"""Starts Arize Phoenix (`phoenix serve`) for the OTLP end-to-end test, with its OTLP/gRPC
receiver bound to 127.0.0.1 instead of every interface (Phoenix binds `[::]` for gRPC
whatever PHOENIX_HOST says; the test only uses OTLP/HTTP, but no test server may listen
beyond loopback). Everything else is Phoenix as installed."""

import sys

import grpc.aio._server as grpc_server

_add_insecure_port = grpc_server.Server.add_insecure_port


def _loopback_only(self, address):
    return _add_insecure_port(self, address.replace("[::]", "127.0.0.1"))


grpc_server.Server.add_insecure_port = _loopback_only

from phoenix.server.main import main  # noqa: E402  (after the patch, on purpose)

sys.argv = ["phoenix", "serve"]
sys.exit(main())
