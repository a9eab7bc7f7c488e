# The JavaScript harness of `POST /tools/execute-javascript`: runs as a Python tool
# (the same confined child, limits and network policy) and evaluates the request's
# JavaScript in QuickJS (quickjs-ng, installed in the workspace's venv on its first
# JavaScript run). The code is the body of an async function, Flowise's form; the
# request's variables are its globals ($input, $vars, $flow, $<argument>); what it
# returns is the result. `fetch` goes out through Python (so the run's network
# policy applies), `console` writes to the run's stdout and stderr.
import json
import sys
import time

# The engine's C module: the `quickjs` package around it starts a thread pool on
# import (which a zygote cannot pre-import), and only its Context is needed.
import _quickjs as quickjs


class JavaScriptError(Exception):
    """The JavaScript threw, or could not be compiled."""


PRELUDE = r"""
(function () {
  const text = (v) => {
    if (typeof v === 'string') return v;
    if (v instanceof Error) return String(v.stack || v);
    try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; } catch (e) { return String(v); }
  };
  const write = (stream) => (...args) => __weir_print(stream, args.map(text).join(' '));
  globalThis.console = { log: write(1), info: write(1), debug: write(1), warn: write(2), error: write(2) };
  class Headers {
    constructor(init) { this.map = {}; for (const [k, v] of Object.entries(init || {})) this.map[k.toLowerCase()] = String(v); }
    get(name) { const v = this.map[String(name).toLowerCase()]; return v === undefined ? null : v; }
    has(name) { return String(name).toLowerCase() in this.map; }
    forEach(fn) { for (const [k, v] of Object.entries(this.map)) fn(v, k, this); }
    entries() { return Object.entries(this.map)[Symbol.iterator](); }
  }
  globalThis.Headers = Headers;
  // Timers run in order once the code awaits; a delay is slept, not scheduled.
  let timers = 0;
  const cancelled = new Set();
  globalThis.setTimeout = (fn, ms, ...args) => {
    const id = ++timers;
    Promise.resolve().then(() => {
      if (cancelled.has(id)) return;
      if (ms > 0) __weir_sleep(Math.min(Number(ms), 600000));
      fn(...args);
    });
    return id;
  };
  globalThis.clearTimeout = (id) => { cancelled.add(id); };
  globalThis.fetch = async function (url, options) {
    options = options || {};
    let headers = options.headers || {};
    if (headers instanceof Headers) headers = headers.map;
    let body = options.body;
    if (body !== undefined && body !== null && typeof body !== 'string') body = JSON.stringify(body);
    const answer = JSON.parse(__weir_fetch(String(url), JSON.stringify({
      method: String(options.method || 'GET').toUpperCase(), headers, body: body === undefined ? null : body,
    })));
    if (answer.error) throw new TypeError('fetch failed: ' + answer.error);
    return {
      ok: answer.status >= 200 && answer.status < 300, status: answer.status, statusText: answer.statusText,
      url: answer.url, headers: new Headers(answer.headers),
      text: async () => answer.body, json: async () => JSON.parse(answer.body),
    };
  };
})();
"""

RUN = r"""
var __weir = { done: false };
(async function () {
%s
})().then(function (value) {
  __weir.done = true;
  __weir.kind = typeof value;
  __weir.value = value === undefined ? null : JSON.stringify(value);
}, function (error) {
  __weir.done = true;
  __weir.error = error instanceof Error ? error.name + ': ' + error.message : 'Uncaught ' + JSON.stringify(error);
  __weir.stack = error instanceof Error && error.stack ? String(error.stack) : '';
});
"""

FETCH_TIMEOUT = 30


def _print(stream, text):
    print(text, file=sys.stdout if stream == 1 else sys.stderr, flush=True)


def _sleep(ms):
    time.sleep(ms / 1000)


def _fetch(url, options):
    # Imported when used: urllib.request brings http.client, ssl and email (~20 ms).
    import urllib.error
    import urllib.request

    options = json.loads(options)
    body = options.get("body")
    request = urllib.request.Request(
        url, data=None if body is None else body.encode(), method=options.get("method") or "GET",
        headers={str(k): str(v) for k, v in (options.get("headers") or {}).items()})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as r:
            status, reason, headers, data, final = r.status, r.reason, r.headers, r.read(), r.url
    except urllib.error.HTTPError as e:
        status, reason, headers, data, final = e.code, e.reason, e.headers, e.read(), url
    except (urllib.error.URLError, OSError, ValueError) as e:
        return json.dumps({"error": str(getattr(e, "reason", e))})
    return json.dumps({"status": status, "statusText": str(reason or ""), "url": final,
                       "headers": {k.lower(): v for k, v in headers.items()},
                       "body": data.decode("utf-8", "replace")})


def main(weir_javascript):
    spec = weir_javascript
    context = quickjs.Context()
    context.set_memory_limit(int(spec["memory"]))
    context.add_callable("__weir_fetch", _fetch)
    context.add_callable("__weir_print", _print)
    context.add_callable("__weir_sleep", _sleep)
    context.eval(PRELUDE)
    for name, value in spec["globals"].items():
        context.eval("globalThis[%s] = JSON.parse(%s);" % (json.dumps(name), json.dumps(json.dumps(value))))
    try:
        context.eval(RUN % spec["code"])
    except quickjs.JSException as e:
        raise JavaScriptError(str(e).split("\n")[0]) from None
    try:
        while context.execute_pending_job():
            pass
    except quickjs.JSException as e:
        raise JavaScriptError(str(e).split("\n")[0]) from None
    state = json.loads(context.eval(
        "JSON.stringify({done: __weir.done, kind: __weir.kind, value: __weir.value, "
        "error: __weir.error, stack: __weir.stack})"))
    if not state["done"]:
        raise JavaScriptError("the function's promise never settled (it awaits something that never ends)")
    if state.get("error") is not None:
        raise JavaScriptError(state["error"])
    if state["value"] is None:
        return None
    return json.loads(state["value"])
