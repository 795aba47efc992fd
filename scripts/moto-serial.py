"""moto's server (what `moto_server` runs), answering one request at a time.

moto checks a write's condition and applies the write in separate steps, on
a thread per connection, so two conditional writes of one item that arrive
together can both succeed: a race DynamoDB never loses (seen in the
interop tests: two applies both took the apply lock). Serving one request at
a time gives the tests what DynamoDB guarantees; connections stay threaded,
so clients that keep theirs open do not block each other between requests
(a client that stalls in the middle of sending a body holds up the others:
fine for tests, which never do).

usage: moto-serial.py HOST PORT   (started by scripts/moto-server)
"""

import signal
import sys
import threading

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple

# Stopped by SIGTERM (scripts/moto-server's `kill PID`): exit 0, as moto_server does.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

moto = DomainDispatcherApplication(create_backend_app)
one_at_a_time = threading.Lock()


def serialized(environ, start_response):
    with one_at_a_time:
        # The whole answer is made inside the lock.
        answer = moto(environ, start_response)
        try:
            return [b"".join(answer)]
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()


run_simple(
    sys.argv[1],
    int(sys.argv[2]),
    serialized,
    threaded=True,
    request_handler=MotoRequestHandler,
)
