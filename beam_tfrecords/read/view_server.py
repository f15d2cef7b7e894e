"""`beam-tfrecords view`: a local page to browse a dataset record by record.

    beam-tfrecords view out/detections            # prints its address
    beam-tfrecords view out/today --against out/yesterday
    server = btr.open("out/detections").view()    # from a notebook

The page is Flask's (the `view` extra: pip install 'beam-tfrecords[view]'):
Werkzeug serves and routes it, Jinja2 renders it with every value from
the data escaped (autoescape), and it has no script at all, so nothing
in a dataset can run in the browser: navigation, filters and the
histograms' links are plain links and GET forms. Flask is small, kept
up by the Pallets project, and needs nothing from the network (no CDN:
the page's one style sheet comes from this package).

Safe by construction: it listens on 127.0.0.1 only; it is read-only
(GET only); a route names a split, a record number or a feature, each
checked against the dataset, never a path, so nothing outside the
dataset can be read; responses forbid scripts, frames and other origins
(Content-Security-Policy) and content sniffing; a request reads at most
one record (a page), SCAN_BATCH records at a time for up to 2 seconds (a
filter), or statistics.pb and the rejected rows' first entries per
reason. A dataset replaced while the page is open is refused with a
message, never mixed with the new one (view_records).

Addresses: / (the splits), /<split>/<number> (a record), /<split>/random,
/<split>/go?n=, /<split>/<number>/media/<feature> (an image),
/-/filter/<split>?feature=&op=&value=&lo=&hi=&start=, /-/stats/<split>,
/-/errors; with --against, a record's page shows both datasets' record
of that number, or with ?key=FEATURE the other's first record with the
same value of FEATURE.
"""

import os
import re
import threading
from typing import Any, Optional

from beam_tfrecords.core.errors import DatasetReplacedError, InputError
from beam_tfrecords.read.view_records import (OPS, Filter, NotFound,
                                              Viewer)

__all__ = ["make_app", "ViewServer", "serve"]

HOST = "127.0.0.1"
MISSING = ("the viewer needs Flask: pip install 'beam-tfrecords[view]' "
           "(or `make setup` here)")
_POLICY = ("default-src 'none'; img-src 'self'; style-src 'self'; "
           "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def _flask() -> Any:
  try:
    import flask  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise InputError(MISSING) from e
  return flask


def make_app(viewer: Viewer, against: Optional[Viewer] = None) -> Any:
  """The Flask application showing `viewer`'s dataset (and `against`'s
  beside it)."""
  flask = _flask()
  here = os.path.join(os.path.dirname(__file__), "view_templates")
  app = flask.Flask("beam_tfrecords_view", template_folder=here,
                    static_folder=os.path.join(here, "static"),
                    static_url_path="/-/static")
  app.jinja_env.autoescape = True  # (every template, whatever its name)
  # Only this machine's names: a page elsewhere whose name was made to
  # resolve to 127.0.0.1 (DNS rebinding) gets 400, not the records.
  app.config["TRUSTED_HOSTS"] = ["127.0.0.1", "localhost"]

  def page(template: str, **values: Any) -> Any:
    return flask.render_template(template, viewer=viewer, against=against,
                                 **values)

  _answers(app, flask, page)
  _record_pages(app, flask, page, viewer, against)
  _split_pages(app, flask, page, viewer)
  return app


def _answers(app: Any, flask: Any, page: Any) -> None:
  """Every response's headers, and errors as pages with their message."""

  @app.after_request
  def _headers(response):
    response.headers["Content-Security-Policy"] = _POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response

  @app.errorhandler(NotFound)
  def _not_found(e):
    return page("message.html", title="Not found", message=str(e)), 404

  @app.errorhandler(DatasetReplacedError)
  def _replaced(e):
    return page("message.html", title="Replaced", message=(
        f"{e}. Start the viewer again to see the new build.")), 409

  @app.errorhandler(InputError)
  def _bad(e):
    return page("message.html", title="Cannot show that",
                message=str(e)), 400

  @app.errorhandler(404)
  def _no_route(_):
    return page("message.html", title="Not found", message=(
        f"{flask.request.path} is not a page of this viewer")), 404


def _record_pages(app: Any, flask: Any, page: Any, viewer: Viewer,
                  against: Optional[Viewer]) -> None:
  """A record by number, the ways to reach one, and its images."""

  @app.route("/<split>/")
  def first(split):
    viewer.count(split)
    return flask.redirect(flask.url_for("record", split=split, n=0))

  @app.route("/<split>/random")
  def random_record(split):
    return flask.redirect(flask.url_for("record", split=split,
                                        n=viewer.random(split)))

  @app.route("/<split>/go")
  def go(split):
    text = flask.request.args.get("n", "").replace(",", "").strip()
    return flask.redirect(flask.url_for("record", split=split,
                                        n=_whole(text, "a record number")))

  @app.route("/<split>/<int:n>")
  def record(split, n):
    total = viewer.count(split)
    shown = viewer.shown(split, n)
    key = flask.request.args.get("key", "")
    other, where = None, None
    if against is not None:
      where = n
      try:
        if key:  # the other's record with the same value of `key`
          value = viewer.value(viewer.record(split, n), key)
          where = against.find(split, key, value)
          if where is None:
            raise NotFound(f"{against.path}: no record of {split} has "
                           f"{key} = {value!r} (read for up to 2 s)")
        other = against.shown(split, where)
      except InputError as e:  # (NotFound too: a note in its column)
        other = {"missing": str(e)}
    return page("record.html", split=split, n=n, total=total, shown=shown,
                other=other, key=key, where=where)

  @app.route("/<split>/<int:n>/media/<path:feature>")
  def media(split, n, feature):
    data, kind = viewer.media(split, n, feature)
    return flask.Response(data, mimetype=kind)

  @app.route("/-/against/<split>/<int:n>/media/<path:feature>")
  def against_media(split, n, feature):
    if against is None:
      raise NotFound("no dataset to compare with (view DIR --against DIR2)")
    data, kind = against.media(split, n, feature)
    return flask.Response(data, mimetype=kind)


def _split_pages(app: Any, flask: Any, page: Any, viewer: Viewer) -> None:
  """The splits, a split's filters and histograms, the rejected rows."""

  @app.route("/")
  def index():
    return page("index.html", splits=viewer.splits())

  @app.route("/-/filter/<split>")
  def filter_(split):
    args = flask.request.args
    flt = Filter(args.get("feature", ""), args.get("op", "eq"),
                 args.get("value", ""), args.get("lo", ""),
                 args.get("hi", ""), args.get("lo_open", "") == "1",
                 args.get("hi_closed", "") == "1")
    start = _whole(args.get("start", "0") or "0", "start")
    scan = viewer.scan(split, flt, start) if flt.feature else None
    matches = [(n, viewer.value(r, flt.feature))
               for n, r in scan.matches] if scan else []
    return page("filter.html", split=split, flt=flt, scan=scan, ops=OPS,
                matches=matches,
                features=viewer.listed + viewer.step_features,
                query={k: args[k] for k in _FILTER_ARGS if k in args})

  @app.route("/-/stats/<split>")
  def stats(split):
    return page("stats.html", split=split,
                histograms=viewer.histograms(split))

  @app.route("/-/errors")
  def errors():
    groups, stopped = viewer.errors()
    return page("errors.html", groups=groups, stopped=stopped)


# A filter's arguments, all a "go on" link carries.
_FILTER_ARGS = ("feature", "op", "value", "lo", "hi", "lo_open", "hi_closed")


def _whole(text: str, what: str) -> int:
  """A whole number from 0 of at most 18 digits, or InputError."""
  if not re.fullmatch(r"[0-9]{1,18}", text):
    raise InputError(f"{what} is a whole number from 0: got {text[:40]!r}")
  return int(text)


class ViewServer:
  """The page served from a thread (`btr.open(path).view()`): `url`,
  `stop()`; in a notebook it shows as a link."""

  def __init__(self, viewer: Viewer, port: int = 0,
               against: Optional[Viewer] = None):
    # pylint: disable=import-outside-toplevel
    import logging
    from werkzeug.serving import make_server
    # (Werkzeug logs each request at INFO; the page is its own log.)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    self._server = make_server(HOST, port, make_app(viewer, against),
                               threaded=True)
    self.port = self._server.server_port
    self.url = f"http://{HOST}:{self.port}/"
    self._thread = threading.Thread(target=self._server.serve_forever,
                                    name="btr-view", daemon=True)
    self._thread.start()

  def stop(self) -> None:
    self._server.shutdown()
    self._thread.join()
    self._server.server_close()

  def __enter__(self) -> "ViewServer":
    return self

  def __exit__(self, *exc: Any) -> None:
    self.stop()

  def __repr__(self) -> str:
    return f"<ViewServer {self.url}>"

  def _repr_html_(self) -> str:
    return f'<a href="{self.url}" target="_blank">{self.url}</a>'


def serve(path: str, port: int = 0, against: Optional[str] = None
          ) -> ViewServer:
  """Starts the page for the dataset at `path` (and `against`'s beside
  it) on 127.0.0.1:`port` (0: a free port)."""
  _flask()
  return ViewServer(Viewer(path), port,
                    Viewer(against) if against else None)
