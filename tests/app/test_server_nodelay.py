"""The server's sockets send each answer at once (app/server/serve.py nodelay_sockets): the
connections it accepts have TCP_NODELAY, or every request on a keep-alive connection waits
40 ms for the client's delayed ACK (issue 23). The figure itself is bench/latency.py's: a
test that times the real server would be a timing test."""

from __future__ import annotations

import socket

from app.server import serve


def test_a_connection_the_servers_listening_socket_accepts_has_tcp_nodelay():
    from streamlit.web.server.starlette import starlette_server

    serve.nodelay_sockets()
    serve.nodelay_sockets()  # twice (a second server in one process) wraps it once
    listening = starlette_server._bind_socket("127.0.0.1", 0, 8)  # what the server binds with
    assert starlette_server._bind_socket.nodelay
    with listening, socket.create_connection(listening.getsockname()) as client:
        listening.setblocking(True)
        accepted, _ = listening.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert client.fileno() >= 0


def test_streamlit_still_binds_through_the_function_that_is_wrapped():
    """An upgrade that binds another way would leave the wrapper unused, silently."""
    import inspect

    from streamlit.web.server.starlette import starlette_server

    assert "_bind_socket(" in inspect.getsource(starlette_server._bind_server_socket)
