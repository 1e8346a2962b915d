#!/usr/bin/env python3
"""Flags the coroutine patterns GCC 12 miscompiles (README, "GCC 12
miscompiles some coroutine code"; tests/coroutine_probe measures them), so
the rules stop depending on memory. Heuristic and textual: it reads each `co_await`/`co_return`
statement and each lambda, not the types. A line that must keep a flagged
shape says why with a trailing `// coroutine-rules: ok (REASON)`.

  scripts/check-coroutine-rules.py [PATH ...]   (default: src tests bench)
  scripts/check-coroutine-rules.py --self-test  (each rule on a known-bad snippet)
Exits 1 when it finds a violation.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# An argument that builds an owning temporary right in the call.
OWNING_TEMPORARY = re.compile(
    r"""(std::string\s*[({]      # std::string("x"), std::string{...}
       |json::(object|array|value|string)\s*[({]
       |std::vector<[^>]*>\s*[({]
       |std::to_string\s*\(
       |"\s*\+|\+\s*"            # "literal" + x, x + "literal"
       |\b[A-Z]\w*\s*\{           # Options{...}: an aggregate prvalue
       )""",
    re.VERBOSE,
)
AWAITED_CALL = re.compile(r"co_await\s+([\w:.>\-\[\]]+?)\s*\((.*)\)\s*;?\s*$", re.S)
CAPTURING_COROUTINE_LAMBDA = re.compile(
    r"\[[^\]\s][^\]]*\]\s*\([^)]*\)\s*(mutable\s*)?->\s*(boost::)?(asio::)?awaitable\b")
# A lambda expression (not a subscript: no identifier or bracket before it).
LAMBDA = re.compile(r"(?<![\w)\]])\[[^\[\]]*\]\s*(\([^()]*\)\s*)?(mutable\s*)?\{")
SUPPRESS = "coroutine-rules: ok"


def statements(text):
    """(line number, text) of each statement holding co_await or co_return:
    text is cut at `;`, `{` and `}` outside parentheses, so a braced
    initializer inside a call stays with its statement."""
    start, line, parens = 0, 1, 0
    for i, ch in enumerate(text):
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens = max(0, parens - 1)
        elif ch in ";{}" and parens == 0:
            chunk = text[start:i + 1]
            if "co_await" in chunk or "co_return" in chunk:
                lead = len(chunk) - len(chunk.lstrip())
                yield text.count("\n", 0, start + lead) + 1, chunk.strip()
            start = i + 1


def strip_comments_and_strings(source):
    # Keep the lines; blank out comments (string literals stay: they matter).
    source = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def check_file(path):
    raw = path.read_text(errors="replace")
    raw_lines = raw.splitlines()
    text = strip_comments_and_strings(raw)
    problems = []

    def report(line, rule, what):
        if line - 1 < len(raw_lines) and SUPPRESS in raw_lines[line - 1]:
            return
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        problems.append(f"{shown}:{line}: rule {rule}: {what}")

    for line, stmt in statements(text):
        flat = " ".join(stmt.split())
        if re.search(r"co_return\s+co_await\b", flat):
            report(line, 1, "co_return co_await: await into a local, then co_return it")
        bare = re.sub(r'"(\\.|[^"\\])*"|\'(\\.|[^\'\\])*\'', '""', flat)  # string literals out
        if "co_await" in bare and re.search(r"\?[^?;]*:", bare.replace("::", "  ")):
            report(line, 1, "co_await in a statement with ?: (GCC 12 reads freed memory): use if/else")
        if "co_await" in bare and LAMBDA.search(bare):
            report(line, 5, "lambda in a statement that suspends (GCC 12 may destroy its captures twice): "
                            "await into a local first")
        for m in re.finditer(r"co_await\s+[\w:.>\-\[\]]+\s*\(", flat):
            # The awaited call's argument list, up to its closing parenthesis.
            depth, j = 1, m.end()
            while j < len(flat) and depth:
                depth += {"(": 1, ")": -1}.get(flat[j], 0)
                j += 1
            args = flat[m.end(): j - 1]
            hit = OWNING_TEMPORARY.search(args)
            if hit:
                report(line, "2/4", f"owning temporary `{hit.group(0).strip()}` in an awaited call: "
                                    "name it first and std::move it")
    for m in CAPTURING_COROUTINE_LAMBDA.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        report(line, 3, "capturing lambda as a coroutine: use a named coroutine with by-value parameters")
    return problems


# One line per shape the check must flag, and two it must not.
SELF_TEST = """\
asio::awaitable<std::string> a() { co_return co_await b(); }
asio::awaitable<void> c() {
  co_await push(std::string("x") + y);
  co_await send(Options{1, 2});
  co_await note(json::object{{"a", 1}});
  auto f = [this, s]() -> asio::awaitable<void> { co_return; };
  int v = flag ? co_await a() : 1;
  co_await fine(std::move(frame), "a:b");
  std::string t = x ? "a" : "b";
  asio::post(co_await asio::this_coro::executor, [w = w_] { w->go(); });
  co_await timer[i].async_wait(use_awaitable);
}
"""


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "bad.cpp"
        path.write_text(SELF_TEST)
        lines = sorted(int(p.split(":")[1]) for p in check_file(path))
    expected = [1, 3, 4, 5, 6, 7, 10]
    print(f"self-test: flagged lines {lines}, expected {expected}")
    return 0 if lines == expected else 1


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    roots = [ROOT / p for p in (argv or ["src", "tests", "bench"])]
    files = [f for r in roots for f in (r.rglob("*") if r.is_dir() else [r])
             if f.suffix in (".cpp", ".hpp") and "node_modules" not in f.parts and "coroutine_probe" not in f.parts]
    problems = [p for f in sorted(files) for p in check_file(f)]
    for p in problems:
        print(p)
    print(f"coroutine rules: {len(files)} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
