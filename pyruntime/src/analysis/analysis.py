"""Code analysis run inside the server's embedded CPython (loaded by py.rs).

Only trusted, side-effect-free work happens here: tokenizing and parsing tool code,
looking up module specs and distribution metadata in a venv's site-packages. Tool code
itself is never imported, compiled or executed in this interpreter.
"""

import ast
import io
import json
import os
import re
import stat
import sys
import sysconfig
import tokenize
from importlib.machinery import PathFinder

_QUOTED = re.compile(r"([A-Za-z]*)('''|\"\"\"|'|\")")
_IGNORED_MODULES = {"__future__", "__main__", "weir_runtime"}


def _lines(code):
    return io.StringIO(code).readlines()


# Python 3.12+ splits an f-string into FSTRING_START ... FSTRING_END tokens; it is one
# STRING token in 3.11. Both become one span here.
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def _literal_spans(code):
    """(start, end, kind, token text) of every STRING (f-strings whole) and COMMENT token,
    in character offsets."""
    offsets = [0]
    for line in _lines(code):
        offsets.append(offsets[-1] + len(line))

    def offset(position):
        return offsets[position[0] - 1] + position[1]

    spans = []
    fstring_starts = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if _FSTRING_START is not None and tok.type == _FSTRING_START:
            fstring_starts.append(offset(tok.start))
        elif _FSTRING_END is not None and tok.type == _FSTRING_END and fstring_starts:
            start = fstring_starts.pop()
            if not fstring_starts:
                end = offset(tok.end)
                spans.append((start, end, tokenize.STRING, code[start:end]))
        elif fstring_starts:
            continue
        elif tok.type in (tokenize.STRING, tokenize.COMMENT):
            start, end = offset(tok.start), offset(tok.end)
            spans.append((start, end, tok.type, tok.string))
    return spans


def _escape_for_literal(text, quote, is_bytes, is_fstring):
    out = []
    data = text.encode("utf-8") if is_bytes else text
    for item in data:
        ch = chr(item) if is_bytes else item
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == quote[0]:
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F or (is_bytes and code > 0x7F):
            out.append("\\x%02x" % code)
        elif is_fstring and ch in "{}":
            out.append(ch * 2)
        elif not is_bytes and (code in (0x85, 0x2028, 0x2029) or 0xD800 <= code <= 0xDFFF):
            out.append("\\u%04x" % code)
        else:
            out.append(ch)
    return "".join(out)


def _fstring_context(body, offset):
    """Where `offset` stands in the body (text between the quotes) of a 3.11 f-string:
    "literal" (also a format spec), "expr" (code of a replacement field), or "nested" (a
    string literal inside a replacement field)."""
    fields = []  # per open field: [bracket depth, in format spec]
    i = 0
    while i < offset:
        ch = body[i]
        in_code = bool(fields) and not fields[-1][1]
        if not in_code:
            if not fields and body.startswith(("{{", "}}"), i):
                i += 2
                continue
            if ch == "{":
                fields.append([0, False])
            elif ch == "}" and fields:
                fields.pop()
            i += 1
            continue
        if ch in "'\"":
            quote = body[i : i + 3] if body.startswith(ch * 3, i) else ch
            close = body.find(quote, i + len(quote))
            if close == -1 or offset < close + len(quote):
                return "nested"
            i = close + len(quote)
            continue
        field = fields[-1]
        if ch in "([{":
            field[0] += 1
        elif ch in ")]" or (ch == "}" and field[0] > 0):
            field[0] -= 1
        elif ch == "}":
            fields.pop()
        elif ch == ":" and field[0] == 0:
            field[1] = True
        i += 1
    if fields and not fields[-1][1]:
        return "expr"
    return "literal"


def _quote_free(value):
    """A Python expression for a JSON value using no quote, backslash or brace, so it is
    inert even inside an f-string's replacement field."""
    if isinstance(value, str):
        return "bytes([%s]).decode()" % ",".join(str(b) for b in value.encode("utf-8"))
    if isinstance(value, list):
        return "[%s]" % ",".join(_quote_free(v) for v in value)
    if isinstance(value, dict):
        pairs = ",".join("(%s,%s)" % (_quote_free(k), _quote_free(v)) for k, v in value.items())
        return "dict([%s])" % pairs
    return repr(value)  # None, bool, int, float


def _harmless(text, is_bytes):
    return (
        not any(c in text for c in "\\'\"\r\n{}")
        and text.isprintable()
        and (not is_bytes or text.isascii())
    )


def _in_string(token_text, offset, text, json_text):
    """(replacement, warning) for a template at `offset` inside the literal `token_text`."""
    match = _QUOTED.match(token_text)
    if match is None:  # not expected from tokenize; stay safe
        return repr(text), None
    prefix, quote = match.group(1).lower(), match.group(2)
    is_bytes, is_raw, is_fstring = "b" in prefix, "r" in prefix, "f" in prefix
    context = "literal"
    if is_fstring:
        context = _fstring_context(token_text[match.end() :], offset - match.end())
    if context == "expr":
        return "(%s)" % _quote_free(json.loads(json_text)), None
    if context == "nested":
        if _harmless(text, is_bytes):
            return text, None
        return "", (
            "a template inside a string nested in an f-string expression was left empty "
            "(its value cannot be inserted there safely)"
        )
    # A backslash the code put just before the template would escape our first character;
    # Python keeps an unknown escape such as `\{` as a backslash, so doubling it keeps the
    # value the author meant.
    body_before = token_text[match.end() : offset]
    dangling = (len(body_before) - len(body_before.rstrip("\\"))) % 2 == 1
    if not is_raw:
        escaped = _escape_for_literal(text, quote, is_bytes, is_fstring)
        return ("\\" if dangling else "") + escaped, None
    if _harmless(text, is_bytes):
        return text, None
    if dangling:
        return "", (
            "a template after a backslash in a raw string was left empty "
            "(its value cannot be inserted there safely)"
        )
    # A raw literal cannot escape anything: close it, add a separate literal holding the
    # value (adjacent literals concatenate), and reopen it.
    value = repr(text.encode("utf-8")) if is_bytes else repr(text)
    return "%s %s %s%s" % (quote, value, match.group(1), quote), None


def _in_comment(text):
    return text.encode("unicode_escape").decode("ascii")


def _as_literal(json_text):
    return "(%s)" % repr(json.loads(json_text))


def substitute(code, replacements):
    """Replaces each (start, end, text, json) in `code`.

    Returns (code, warnings), or None if `code` cannot be tokenized. When the code does not
    parse even with inert values, the inert version is returned: the run then reports the
    author's syntax error, and a value can never complete broken code into working code.
    """
    try:
        spans = _literal_spans(code)
    except (tokenize.TokenError, SyntaxError):
        return None
    inert = [(start, end, "", "null") for start, end, _, _ in replacements]
    probe, _ = _apply(code, spans, inert)
    try:
        ast.parse(probe)
    except (SyntaxError, ValueError):
        return probe, ["the code does not parse, so no template was filled in"]
    return _apply(code, spans, replacements)


def _apply(code, spans, replacements):
    out = []
    warnings = []
    cursor = 0
    span_index = 0
    for start, end, text, json_text in sorted(replacements):
        if start < cursor:
            continue
        while span_index < len(spans) and spans[span_index][1] <= start:
            span_index += 1
        span = spans[span_index] if span_index < len(spans) else None
        inside = span is not None and span[0] <= start and end <= span[1]
        if inside and span[2] == tokenize.STRING:
            replacement, warning = _in_string(span[3], start - span[0], text, json_text)
            if warning and warning not in warnings:
                warnings.append(warning)
        elif inside:
            replacement = _in_comment(text)
        else:
            replacement = _as_literal(json_text)
        out.append(code[cursor:start])
        out.append(replacement)
        cursor = end
    out.append(code[cursor:])
    return "".join(out), warnings


_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _guards_imports(node):
    """Whether a `try` statement catches a failed import (optional dependency)."""
    for handler in node.handlers:
        kinds = handler.type
        if kinds is None:
            return True
        names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        if any(isinstance(n, ast.Name) and n.id in _GUARDS for n in names):
            return True
    return False


def imports(code):
    """Top-level names of absolute imports that are not part of the standard library.

    Imports inside the body of a `try` that catches ImportError are optional and skipped.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    optional = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _guards_imports(node):
            for statement in node.body:
                optional.update(id(inner) for inner in ast.walk(statement))
    found = []
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            found.append((node.lineno, node.col_offset, name.split(".")[0]))
    result = []
    for _, _, name in sorted(found):
        if name in result or name in _IGNORED_MODULES or name in sys.stdlib_module_names:
            continue
        result.append(name)
    return result


def missing_modules(site_packages, names):
    """The names that cannot be found as modules in `site_packages` (nothing is imported)."""
    return [name for name in names if PathFinder.find_spec(name, [site_packages]) is None]


# The largest metadata file read (its headers come first; a larger one is cut).
_METADATA_CAP = 256 * 1024


def _read_headers(directory_fd, name):
    """The `Name` and `Version` headers of metadata file `name` in a directory, or None.

    The venv belongs to the workspace's install ids: a link is never followed, nothing
    but a regular file is opened (a FIFO would block the server), and at most
    `_METADATA_CAP` bytes are read.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=directory_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, _METADATA_CAP).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    headers = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        if key in ("Name", "Version") and key not in headers:
            headers[key] = value.strip()
    return headers


def distributions(site_packages):
    """{normalized name: version} of the distributions installed in `site_packages`
    (`*.dist-info/METADATA` and `*.egg-info/PKG-INFO`), read without following links."""
    found = {}
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        site_fd = os.open(site_packages, flags)
    except OSError:
        return found
    try:
        for entry in os.scandir(site_fd):
            if entry.name.endswith(".dist-info"):
                file = "METADATA"
            elif entry.name.endswith(".egg-info"):
                file = "PKG-INFO"
            else:
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                info_fd = os.open(entry.name, flags, dir_fd=site_fd)
            except OSError:
                continue
            try:
                headers = _read_headers(info_fd, file)
            finally:
                os.close(info_fd)
            if headers and headers.get("Name") and headers.get("Version"):
                found[re.sub(r"[-_.]+", "-", headers["Name"]).lower()] = headers["Version"]
    finally:
        os.close(site_fd)
    return found


def interpreter():
    """Facts about this interpreter: version, base executable, scripts directory."""
    version = "%d.%d" % sys.version_info[:2]
    bindir = sysconfig.get_config_var("BINDIR") or ""
    candidates = [bindir + "/python" + version, bindir + "/python3", sys.executable or ""]
    base = next((c for c in candidates if c and os.access(c, os.X_OK)), "")
    return {
        "version": sys.version.split()[0],
        "executable": base,
        "scripts": sysconfig.get_path("scripts") or "",
        "host": sys.executable or "",
        "base_prefix": sys.base_prefix or "",
    }
