"""Every dashboard page tells Streamlit's front end where the server is, so it asks there alone.

A page such as ``/run`` is Streamlit's index.html. Its front end (Streamlit 1.67) looks for
the server at the page's own path first and one folder up after: ``/run/_stcore/health`` and
``/run/_stcore/host-config``, which Streamlit's static files answer 404 on purpose so that it
moves on to ``/_stcore/health``; two 404s in the log on every page load (issue 20, item 16).
Where a host sets ``window.__streamlit.BACKEND_BASE_URL`` the front end asks that URL only.
This middleware sets it, in every HTML page, to the folder the page is in (where the page's
``./static/...`` assets resolve too, so a proxy's path prefix is kept)::

    <head><script>window.__streamlit=Object.assign({},window.__streamlit,
        {BACKEND_BASE_URL:new URL(".",location.href).href})</script>...
"""

from __future__ import annotations

HEAD = b"<head>"
SCRIPT = (b'<script>window.__streamlit=Object.assign({},window.__streamlit,'
          b'{BACKEND_BASE_URL:new URL(".",location.href).href})</script>')


class PageBaseMiddleware:
    """Pure ASGI: a browser's GET of a page has the script put at the top of its <head>."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not _asks_html(scope):
            return await self.app(scope, receive, send)
        # uncompressed, so the page can be edited (index.html is 9 kB; assets are not pages)
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"accept-encoding"]
        await self.app({**scope, "headers": headers}, receive, _Editing(send).send)


def _asks_html(scope) -> bool:
    """A navigation (``Accept: text/html,...``); fetch() and the assets ask otherwise."""
    return any(k.lower() == b"accept" and b"text/html" in v for k, v in scope["headers"])


def with_script(page: bytes) -> bytes:
    at = page.find(HEAD)
    return page if at < 0 else page[:at + len(HEAD)] + SCRIPT + page[at + len(HEAD):]


class _Editing:
    """Holds back an HTML answer until its last chunk, then sends it with the script in."""

    def __init__(self, send):
        self.downstream, self.start, self.body = send, None, []

    async def send(self, message) -> None:
        if message["type"] == "http.response.start":
            if message["status"] == 200 and _is_html(message.get("headers", [])):
                self.start = message
                return
        elif message["type"] == "http.response.body" and self.start is not None:
            self.body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            return await self._flush()
        await self.downstream(message)

    async def _flush(self) -> None:
        page = with_script(b"".join(self.body))
        headers = [(k, v) for k, v in self.start.get("headers", [])
                   if k.lower() not in (b"content-length", b"etag")]  # the bytes changed
        headers.append((b"content-length", str(len(page)).encode()))
        await self.downstream({**self.start, "headers": headers})
        await self.downstream({"type": "http.response.body", "body": page})


def _is_html(headers) -> bool:
    return any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in headers)
