// Probe for the coroutine rules in README.md ("GCC 12 miscompiles some
// coroutine code"). Each pattern below deliberately uses one of the forbidden
// shapes many times over (Boost.Asio awaitables on an io_context, several
// suspension points, values that own heap memory) and checks that what the
// callee receives / the caller gets back is intact.
//
//   probe            run every rule pattern (not the controls), exit 1 on FAIL
//   probe NAME...    run the named patterns (controls included)
//   probe --list     print "NAME RULE" for every pattern
//
// Output: one "RESULT <name> PASS|FAIL|SKIP <detail>" line per pattern. Names
// start with the README rule they exercise (r1_ .. r4_); x_ marks a shape no
// rule forbids.
// Patterns whose name starts with "ctl_" are controls: they are undefined
// behaviour in standard C++ (a dangling reference/closure), so they are
// expected to fail on every compiler; they show the probe can see a failure.
//
// Build: see run.sh (single TU, header-only Asio and Boost.JSON).

#include <boost/asio.hpp>
#include <boost/json.hpp>
#include <boost/json/src.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

// GCC 12.2 rejects, with "error: array used as initializer", any
// full-expression that contains a co_await and also creates a
// std::initializer_list backing array: `co_await f(json::object{{"a", 1}})`,
// `co_await f(std::vector<std::string>{a, b})`, `co_await f(Options{})` when a
// default member initializer of Options is a braced list, and
// `std::vector<std::string> v{a, co_await g()}`. Those shapes are built only
// where they compile; elsewhere their patterns report SKIP. Override with
// -DPROBE_INITLIST_IN_AWAIT=0/1.
#ifndef PROBE_INITLIST_IN_AWAIT
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#define PROBE_INITLIST_IN_AWAIT 0
#else
#define PROBE_INITLIST_IN_AWAIT 1
#endif
#endif

namespace asio = boost::asio;
namespace json = boost::json;
using asio::awaitable;
using asio::use_awaitable;

namespace {

constexpr int kIterations = 200;

// All longer than the 15-character small-string buffer: every copy owns heap
// memory, so a dangling or doubly freed one is visible to ASan.
const std::string kPrefix = "prefix-long-enough-to-live-on-the-heap/";
const std::string kSuffix = "/suffix-long-enough-to-live-on-the-heap";

std::string payload(int i) { return "payload-" + std::to_string(i) + "-padding-padding-padding"; }

// Heap-owning values built without braced lists (see PROBE_INITLIST_IN_AWAIT).
json::object obj_of(const std::string& x) {
  json::object nested;
  nested["k"] = kSuffix;
  json::object o;
  o["a"] = 1;
  o["text"] = x;
  o["nested"] = std::move(nested);
  return o;
}

std::vector<std::string> vec_of(const std::string& x) {
  std::vector<std::string> v;
  v.push_back(kPrefix + x);
  v.push_back(x);
  v.push_back(kSuffix);
  return v;
}

// ---------------------------------------------------------------- bookkeeping

int g_error_count = 0;
std::string g_first_error;

void check(bool ok, std::string_view what) {
  if (ok) return;
  if (g_error_count++ == 0) g_first_error = std::string(what);
}

void check_eq(const std::string& got, const std::string& want, std::string_view what) {
  if (got == want) return;
  std::string msg(what);
  msg += ": got '" + got.substr(0, 60) + "' want '" + want.substr(0, 60) + "'";
  check(false, msg);
}

// Detached coroutines report here; the driver checks all of them finished.
int g_spawned = 0;
int g_spawn_done = 0;

// Keeps freshly allocated '#'-filled strings alive so that heap blocks freed
// too early get reused and overwritten (makes stale reads visible without ASan).
void scribble() {
  static std::vector<std::string> ring(64);
  static unsigned next = 0;
  for (int k = 0; k < 4; ++k) {
    ++next;
    ring[next % ring.size()] = std::string(24 + (next * 8) % 96, '#');
  }
}

// An object that knows whether it is alive: double destruction, use after
// destruction and never-destroyed instances are all counted, independently of
// any sanitizer (the registry lives outside the object, so dead-store
// elimination in the destructor cannot hide anything).
struct Tracked {
  static std::unordered_set<const void*>& live() {
    static std::unordered_set<const void*> set;
    return set;
  }
  static inline int bad_destroy = 0;
  static inline int bad_use = 0;
  static inline int bad_construct = 0;

  std::string text;

  explicit Tracked(std::string t) : text(std::move(t)) { born(); }
  Tracked(const Tracked& o) : text((o.verify(), o.text)) { born(); }
  Tracked(Tracked&& o) noexcept : text((o.verify(), std::move(o.text))) { born(); }
  Tracked& operator=(const Tracked& o) {
    o.verify();
    verify();
    text = o.text;
    return *this;
  }
  Tracked& operator=(Tracked&& o) noexcept {
    o.verify();
    verify();
    text = std::move(o.text);
    return *this;
  }
  ~Tracked() {
    if (live().erase(this) == 0) ++bad_destroy;
  }
  const std::string& get() const {
    verify();
    return text;
  }

 private:
  void born() {
    if (!live().insert(this).second) ++bad_construct;
  }
  void verify() const {
    if (live().count(this) == 0) ++bad_use;
  }
};

// Two suspension points per call by default: one post, one zero timer.
awaitable<void> hop(int n = 2) {
  auto ex = co_await asio::this_coro::executor;
  for (int k = 0; k < n; ++k) {
    if (k % 2 == 0) {
      co_await asio::post(ex, use_awaitable);
    } else {
      asio::steady_timer timer(ex);
      timer.expires_after(std::chrono::nanoseconds(0));
      co_await timer.async_wait(use_awaitable);
    }
    scribble();
  }
}

// ===================================================== rule 1: co_return co_await

awaitable<std::string> make_string(std::string seed) {
  co_await hop();
  std::string out = kPrefix + seed + kSuffix;
  co_return out;
}

awaitable<std::string> r1_string_once(std::string seed) { co_return co_await make_string(seed); }

awaitable<std::string> r1_string_twice(std::string seed) { co_return co_await r1_string_once(seed); }

awaitable<std::string> r1_string_branch(std::string seed, bool flag) {
  if (flag) co_return co_await make_string(seed);
  co_await hop(1);
  co_return co_await r1_string_once(seed);
}

awaitable<void> p_r1_string() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    const std::string want = kPrefix + seed + kSuffix;
    std::string a = co_await r1_string_once(seed);
    check_eq(a, want, "co_return co_await (1 level)");
    std::string b = co_await r1_string_twice(seed);
    check_eq(b, want, "co_return co_await (2 levels)");
    std::string c = co_await r1_string_branch(seed, i % 2 == 0);
    check_eq(c, want, "co_return co_await (in branches)");
  }
}

// co_return co_await whose callee gets a prvalue argument (rules 1 + 4).
awaitable<std::string> r1_string_prvalue_arg(std::string seed) { co_return co_await make_string(kPrefix + seed); }

awaitable<void> p_r1_string_prvalue_arg() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    std::string got = co_await r1_string_prvalue_arg(seed);
    check_eq(got, kPrefix + kPrefix + seed + kSuffix, "co_return co_await f(prvalue)");
  }
}

// co_return cond ? co_await a : co_await b
awaitable<std::string> r1_ternary(std::string seed, bool flag) {
  co_return flag ? co_await make_string(seed) : co_await r1_string_once(seed);
}

awaitable<void> p_r1_ternary() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    std::string got = co_await r1_ternary(seed, i % 2 == 0);
    check_eq(got, kPrefix + seed + kSuffix, "co_return c ? co_await a : co_await b");
  }
}

// The same conditional, awaited into a named local first (rule 1's fix).
awaitable<std::string> r1_ternary_local(std::string seed, bool flag) {
  std::string out = flag ? co_await make_string(seed) : co_await r1_string_once(seed);
  co_return out;
}

awaitable<void> p_r1_ternary_local() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    std::string got = co_await r1_ternary_local(seed, i % 2 == 0);
    check_eq(got, kPrefix + seed + kSuffix, "local = c ? co_await a : co_await b; co_return local");
  }
}

// co_await inside a larger co_return operand, and a converting co_return.
awaitable<std::string> r1_expr_operand(std::string seed) { co_return kPrefix + co_await make_string(seed); }

awaitable<std::optional<std::string>> r1_converting(std::string seed) { co_return co_await make_string(seed); }

awaitable<void> p_r1_expr_operand() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    std::string a = co_await r1_expr_operand(seed);
    check_eq(a, kPrefix + kPrefix + seed + kSuffix, "co_return a + co_await f()");
    std::optional<std::string> b = co_await r1_converting(seed);
    check(b.has_value(), "co_return co_await f() into optional: empty");
    if (b) check_eq(*b, kPrefix + seed + kSuffix, "co_return co_await f() into optional");
  }
}

awaitable<json::object> make_object(std::string seed) {
  co_await hop();
  json::object obj;
  obj["seed"] = seed;
  obj["list"] = json::array{seed, kPrefix, kSuffix};
  obj["nested"] = json::object{{"suffix", kSuffix}, {"n", 42}};
  co_return obj;
}

awaitable<json::object> r1_object_once(std::string seed) { co_return co_await make_object(seed); }

awaitable<json::object> r1_object_twice(std::string seed) { co_return co_await r1_object_once(seed); }

void check_object(const json::object& obj, const std::string& seed, std::string_view what) {
  const json::value* s = obj.if_contains("seed");
  const json::value* l = obj.if_contains("list");
  const json::value* n = obj.if_contains("nested");
  bool ok = obj.size() == 3 && s && s->is_string() && s->as_string() == seed && l && l->is_array() &&
            l->as_array().size() == 3 && l->as_array()[1].is_string() && l->as_array()[1].as_string() == kPrefix &&
            n && n->is_object() && n->as_object().if_contains("suffix") &&
            n->as_object().at("suffix") == json::value(kSuffix);
  check(ok, std::string(what) + ": got " + json::serialize(obj).substr(0, 80));
}

awaitable<void> p_r1_object() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    json::object a = co_await r1_object_once(seed);
    check_object(a, seed, "co_return co_await json::object (1 level)");
    json::object b = co_await r1_object_twice(seed);
    check_object(b, seed, "co_return co_await json::object (2 levels)");
  }
}

awaitable<Tracked> make_tracked(std::string seed) {
  co_await hop();
  Tracked t(kPrefix + seed);
  co_return t;
}

awaitable<Tracked> r1_tracked_once(std::string seed) { co_return co_await make_tracked(seed); }

awaitable<void> p_r1_tracked() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string seed = payload(i);
    Tracked t = co_await r1_tracked_once(seed);
    check_eq(t.get(), kPrefix + seed, "co_return co_await Tracked");
  }
}

// ============================= rule 2: temporaries that live across a suspension

awaitable<std::string> echo_cref(const std::string& s) {
  co_await hop();
  std::string out = s;
  co_return out;
}

awaitable<std::string> echo_sv(std::string_view s) {
  co_await hop();
  std::string out(s);
  co_return out;
}

awaitable<std::string> echo_val(std::string s) {
  co_await hop();
  co_return s;
}

awaitable<std::string> echo2_cref(const std::string& a, const std::string& b) {
  co_await hop();
  std::string out = a + "|" + b;
  co_return out;
}

awaitable<std::string> echo_json_cref(const json::object& o) {
  co_await hop();
  std::string out = json::serialize(o);
  co_return out;
}

awaitable<void> p_r2_concat_cref() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string a = co_await echo_cref(kPrefix + x);
    check_eq(a, kPrefix + x, "const std::string& <- a + b");
    std::string b = co_await echo_cref(std::string("literal-prefix-that-is-long/") + x);
    check_eq(b, "literal-prefix-that-is-long/" + x, "const std::string& <- std::string(lit) + b");
  }
}

awaitable<void> p_r2_concat_sv() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string a = co_await echo_sv(kPrefix + x);
    check_eq(a, kPrefix + x, "std::string_view <- a + b");
    std::string b = co_await echo_sv(std::string("literal-prefix-that-is-long/") + x);
    check_eq(b, "literal-prefix-that-is-long/" + x, "std::string_view <- std::string(lit) + b");
  }
}

awaitable<void> p_r2_concat_value() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string a = co_await echo_val(kPrefix + x);
    check_eq(a, kPrefix + x, "std::string (by value) <- a + b");
    std::string b = co_await echo_val(std::string("literal-prefix-that-is-long/") + x);
    check_eq(b, "literal-prefix-that-is-long/" + x, "std::string (by value) <- std::string(lit) + b");
  }
}

awaitable<void> p_r2_literal_cref() {
  for (int i = 0; i < kIterations; ++i) {
    std::string a = co_await echo_cref("a string literal that is longer than fifteen characters");
    check_eq(a, "a string literal that is longer than fifteen characters", "const std::string& <- literal");
    std::string b = co_await echo2_cref("first literal, longer than fifteen characters",
                                        "second literal, longer than fifteen characters");
    check_eq(b, "first literal, longer than fifteen characters|second literal, longer than fifteen characters",
             "two const std::string& <- literals");
  }
}

awaitable<void> p_r2_json_cref() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    const std::string want = json::serialize(obj_of(x));
    std::string got = co_await echo_json_cref(obj_of(x));
    check_eq(got, want, "const json::object& <- obj_of(x) prvalue");
  }
}

#if PROBE_INITLIST_IN_AWAIT
awaitable<void> p_r2_json_initlist_cref() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    json::object want_obj{{"type", "frame-type-long-enough"}, {"payload", x}, {"nested", {{"k", kSuffix}}}};
    const std::string want = json::serialize(want_obj);
    std::string got =
        co_await echo_json_cref(json::object{{"type", "frame-type-long-enough"}, {"payload", x}, {"nested", {{"k", kSuffix}}}});
    check_eq(got, want, "const json::object& <- json::object{...}");
  }
}
#endif

// A temporary built before a co_await in the same full-expression and used
// after it (no coroutine parameter involved).
awaitable<void> p_r2_expr_across_await() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    // E1.f(E2): E1 (the temporary) is sequenced before E2 (the co_await).
    std::string a = (kPrefix + x).append(co_await echo_val(x));
    check_eq(a, kPrefix + x + x, "(a + b).append(co_await ...)");
    std::string b = (kPrefix + x).append(co_await echo_cref(x + kSuffix)).append(co_await echo_sv(kSuffix + x));
    check_eq(b, kPrefix + x + x + kSuffix + kSuffix + x, "(a + b).append(co_await ...).append(co_await ...)");
  }
}

#if PROBE_INITLIST_IN_AWAIT
// Braced lists evaluate left to right: the backing array's first element
// lives across the suspension in the second. json::object's initializer list
// holds value_refs to the temporaries, which must survive the co_await too.
awaitable<void> p_r2_initlist_across_await() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::vector<std::string> parts{kPrefix + x, co_await echo_val(x), x + kSuffix};
    check(parts.size() == 3, "vector{tmp, co_await, tmp} size");
    if (parts.size() == 3) {
      check_eq(parts[0], kPrefix + x, "vector{tmp, co_await, tmp}[0]");
      check_eq(parts[1], x, "vector{tmp, co_await, tmp}[1]");
      check_eq(parts[2], x + kSuffix, "vector{tmp, co_await, tmp}[2]");
    }
    json::object obj{{"a", kPrefix + x}, {"b", co_await echo_val(x)}, {"c", x + kSuffix}};
    check(obj.size() == 3 && obj.if_contains("a") && obj.at("a") == json::value(kPrefix + x) && obj.if_contains("b") &&
              obj.at("b") == json::value(x) && obj.if_contains("c") && obj.at("c") == json::value(x + kSuffix),
          "json::object{{k, tmp}, {k, co_await ...}}: got " + json::serialize(obj).substr(0, 80));
    std::string frame = json::serialize(json::object{{"type", "frame-type-long-enough"}, {"data", co_await echo_val(x)}});
    json::object want{{"type", "frame-type-long-enough"}, {"data", x}};
    check_eq(frame, json::serialize(want), "serialize(json::object{..., co_await ...})");
  }
}
#endif

// Lifetime-extended temporaries that stay alive across suspensions: a const
// reference bound to a temporary, and the range of a range-for.
awaitable<void> p_r2_lifetime_extended() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    const std::string& ref = kPrefix + x;
    co_await hop();
    check_eq(ref, kPrefix + x, "const std::string& ref = a + b; co_await; use");
    std::string joined;
    for (const std::string& part : vec_of(x)) {
      co_await hop(1);
      joined += part + ",";
    }
    check_eq(joined, kPrefix + x + "," + x + "," + kSuffix + ",", "for (auto& p : vec_of(x)) { co_await ...; }");
  }
}

// A temporary argument followed by a co_await in the same argument list.
awaitable<void> p_r2_args_with_await() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string got = co_await echo2_cref(kPrefix + x, co_await echo_val(x + kSuffix));
    check_eq(got, kPrefix + x + "|" + x + kSuffix, "f(tmp, co_await g()) with const& params");
  }
}

// Control (UB in standard C++): the temporary dies at the end of the co_spawn
// statement, the coroutine reads the string_view after its first suspension.
awaitable<void> store_sv(std::string_view s, std::string want) {
  co_await hop();
  std::string got(s);
  check_eq(got, want, "string_view to a dead temporary");
  ++g_spawn_done;
}

awaitable<void> p_ctl_spawn_sv_dangling() {
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    ++g_spawned;
    asio::co_spawn(ex, store_sv(kPrefix + x, kPrefix + x), asio::detached);
  }
  co_await hop(6);
}

// A conditional with a co_await in only one arm, outside any co_return
// (none of the four rules forbids this shape).
awaitable<void> p_x_ternary_one_arm() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    const bool flag = i % 2 == 0;
    std::string a = flag ? co_await echo_val(x) : x;
    check_eq(a, x, "local = c ? co_await f() : lvalue");
    std::string b = flag ? kPrefix : co_await echo_val(kPrefix);
    check_eq(b, kPrefix, "local = c ? lvalue : co_await f()");
  }
}

// ===================================== rule 3: capturing lambdas as coroutines

// Immediately invoked inside co_await (the GCC PR 100611 shape).
awaitable<void> p_r3_iife_await() {
  for (int i = 0; i < kIterations; ++i) {
    std::string s = payload(i);
    Tracked t(kSuffix + s);
    std::string got = co_await [s, t]() -> awaitable<std::string> {
      co_await hop();
      std::string out = kPrefix + s + "|" + t.get();
      co_await hop(1);
      co_return out;
    }();
    check_eq(got, kPrefix + s + "|" + kSuffix + s, "co_await [s, t]() -> awaitable {...}()");
  }
}

awaitable<void> p_r3_named_lambda() {
  for (int i = 0; i < kIterations; ++i) {
    std::string s = payload(i);
    Tracked t(kSuffix + s);
    auto fn = [s, t]() -> awaitable<std::string> {
      co_await hop();
      std::string out = kPrefix + s + "|" + t.get();
      co_return out;
    };
    std::string got = co_await fn();
    check_eq(got, kPrefix + s + "|" + kSuffix + s, "auto fn = [s, t]...; co_await fn()");
  }
}

// co_spawn(ex, capturing lambda, use_awaitable), awaited (Asio issue 858 shape).
awaitable<void> p_r3_cospawn_await() {
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < kIterations; ++i) {
    std::string s = payload(i);
    Tracked t(kSuffix + s);
    std::string got = co_await asio::co_spawn(
        ex,
        [s, t]() -> awaitable<std::string> {
          co_await hop();
          std::string out = kPrefix + s + "|" + t.get();
          co_return out;
        },
        use_awaitable);
    check_eq(got, kPrefix + s + "|" + kSuffix + s, "co_await co_spawn(ex, [s, t]..., use_awaitable)");
  }
}

// co_spawn(ex, capturing lambda, detached) inside a scope that ends before the
// lambda body runs. Defined behaviour: co_spawn keeps the function object.
awaitable<void> p_r3_cospawn_detached() {
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < kIterations; ++i) {
    {
      std::string s = payload(i);
      Tracked t(kSuffix + s);
      ++g_spawned;
      asio::co_spawn(
          ex,
          [s, t, i]() -> awaitable<void> {
            co_await hop(3);
            check_eq(s, payload(i), "detached [s, t] lambda: s");
            check_eq(t.get(), kSuffix + payload(i), "detached [s, t] lambda: t");
            ++g_spawn_done;
          },
          asio::detached);
    }
    scribble();
  }
  co_await hop(8);
}

// Control (UB in standard C++): the lambda is invoked and its closure (which
// holds the captures) dies at the end of the statement; the body runs later.
awaitable<void> p_ctl_cospawn_invoked() {
  auto ex = co_await asio::this_coro::executor;
  for (int i = 0; i < kIterations; ++i) {
    {
      std::string s = payload(i);
      ++g_spawned;
      asio::co_spawn(
          ex,
          [s, i]() -> awaitable<void> {
            co_await hop(3);
            check_eq(s, payload(i), "invoked [s] lambda after its closure died");
            ++g_spawn_done;
          }(),
          asio::detached);
    }
    scribble();
  }
  co_await hop(8);
}

// A capturing (plain) lambda passed as a prvalue into a coroutine inside a
// co_await expression (GCC PR 101367 shape).
template <typename F>
awaitable<std::string> call_later(F f) {
  co_await hop();
  std::string out = f();
  co_return out;
}

awaitable<std::string> call_later_fn(std::function<std::string()> f) {
  co_await hop();
  std::string out = f();
  co_return out;
}

awaitable<void> p_r3_lambda_arg() {
  for (int i = 0; i < kIterations; ++i) {
    std::string s = payload(i);
    Tracked t(kSuffix + s);
    std::string a = co_await call_later([s, t] { return kPrefix + s + "|" + t.get(); });
    check_eq(a, kPrefix + s + "|" + kSuffix + s, "co_await f([s, t]{...}) template param");
    std::string b = co_await call_later_fn([s, t] { return kPrefix + s + "|" + t.get(); });
    check_eq(b, kPrefix + s + "|" + kSuffix + s, "co_await f([s, t]{...}) std::function param");
  }
}

// ======================= rule 4: prvalue arguments that own memory, by value

// Default member initializers are calls, not braced lists, so that
// `co_await f(Options{})` compiles with GCC 12 (see PROBE_INITLIST_IN_AWAIT).
std::vector<std::string> default_tags() {
  std::vector<std::string> v;
  v.push_back("tag-one-long-enough-for-heap");
  v.push_back("tag-two-long-enough-for-heap");
  return v;
}

json::object default_extra() {
  json::object o;
  o["key"] = "default-extra-value-on-the-heap";
  return o;
}

struct Options {
  std::string name = "default-option-name-on-the-heap";
  std::vector<std::string> tags = default_tags();
  json::object extra = default_extra();
  Tracked tracked = Tracked("default-tracked-value-on-the-heap");
};

std::string describe(const Options& o) {
  std::string out = o.name;
  for (const auto& t : o.tags) out += "," + t;
  out += ";" + json::serialize(o.extra) + ";" + o.tracked.get();
  return out;
}

awaitable<std::string> take_options(Options o) {
  co_await hop();
  std::string out = describe(o);
  co_return out;
}

awaitable<std::string> take_options_rref(Options&& o) {
  co_await hop();
  std::string out = describe(o);
  co_return out;
}

awaitable<std::string> take_options_and(Options o, std::string extra) {
  co_await hop();
  std::string out = describe(o) + "+" + extra;
  co_return out;
}

awaitable<void> p_r4_options_default() {
  const Options reference{};
  const std::string want = describe(reference);
  for (int i = 0; i < kIterations; ++i) {
    std::string got = co_await take_options(Options{});
    check_eq(got, want, "co_await f(Options{})");
  }
}

awaitable<void> p_r4_options_filled() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    Options reference{kPrefix + x, vec_of(x), obj_of(x), Tracked(x + kSuffix)};
    const std::string want = describe(reference);
    std::string a = co_await take_options(Options{kPrefix + x, vec_of(x), obj_of(x), Tracked(x + kSuffix)});
    check_eq(a, want, "co_await f(Options{...}) by value");
    std::string b = co_await take_options_rref(Options{kPrefix + x, vec_of(x), obj_of(x), Tracked(x + kSuffix)});
    check_eq(b, want, "co_await f(Options{...}) by rvalue reference");
  }
}

#if PROBE_INITLIST_IN_AWAIT
awaitable<void> p_r4_options_initlist() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    Options reference{kPrefix + x, {x, kSuffix}, {{"x", x}}, Tracked(x + kSuffix)};
    const std::string want = describe(reference);
    std::string a = co_await take_options(Options{kPrefix + x, {x, kSuffix}, {{"x", x}}, Tracked(x + kSuffix)});
    check_eq(a, want, "co_await f(Options{..., {a, b}, {{k, v}}}) by value");
  }
}
#endif

awaitable<std::string> take_json(json::object o) {
  co_await hop();  // suspends before the object is read
  std::string out = json::serialize(o);
  co_return out;
}

awaitable<std::string> take_json_and(json::object o, std::string extra) {
  co_await hop();
  std::string out = json::serialize(o) + "+" + extra;
  co_return out;
}

awaitable<void> p_r4_json_value() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    const json::object reference = obj_of(x);
    const std::string want = json::serialize(reference);
    std::string a = co_await take_json(obj_of(x));
    check_eq(a, want, "co_await f(obj_of(x)) by value");
    std::string b = co_await take_json(json::object(reference));
    check_eq(b, want, "co_await f(json::object(copy)) by value");
  }
}

#if PROBE_INITLIST_IN_AWAIT
awaitable<void> p_r4_json_initlist() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    json::object reference{{"a", 1}, {"text", x}, {"nested", {{"k", kSuffix}}}};
    const std::string want = json::serialize(reference);
    std::string got = co_await take_json(json::object{{"a", 1}, {"text", x}, {"nested", {{"k", kSuffix}}}});
    check_eq(got, want, "co_await f(json::object{{...}}) by value");
  }
}
#endif

awaitable<std::string> take_vec(std::vector<std::string> v) {
  co_await hop();
  std::string out;
  for (const auto& s : v) out += s + ",";
  co_return out;
}

awaitable<void> p_r4_vector() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string a = co_await take_vec(vec_of(x));
    check_eq(a, kPrefix + x + "," + x + "," + kSuffix + ",", "co_await f(vec_of(x))");
    std::string b = co_await take_vec(std::vector<std::string>(2, kPrefix + x));
    check_eq(b, kPrefix + x + "," + kPrefix + x + ",", "co_await f(std::vector<std::string>(2, a + b))");
  }
}

#if PROBE_INITLIST_IN_AWAIT
awaitable<void> p_r4_vector_initlist() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string got = co_await take_vec(std::vector<std::string>{kPrefix + x, x, kSuffix});
    check_eq(got, kPrefix + x + "," + x + "," + kSuffix + ",", "co_await f(std::vector<std::string>{...})");
  }
}
#endif

awaitable<std::string> take_tracked(Tracked t) {
  co_await hop();
  std::string out = t.get();
  co_return out;
}

awaitable<void> p_r4_tracked() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    std::string got = co_await take_tracked(Tracked(kPrefix + x));
    check_eq(got, kPrefix + x, "co_await f(Tracked(...))");
  }
}

// An aggregate temporary in a full-expression that contains a co_await but is
// not an argument of any coroutine.
awaitable<void> p_r4_aggregate_not_arg() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    Options reference{kPrefix + x, vec_of(x), obj_of(x), Tracked(x)};
    std::string got = describe(Options{kPrefix + x, vec_of(x), obj_of(x), Tracked(x)}) + co_await echo_val(x);
    check_eq(got, describe(reference) + x, "describe(Options{...}) + co_await g()");
  }
}

// A prvalue argument followed by a co_await in the same argument list.
awaitable<void> p_r4_with_inner_await() {
  for (int i = 0; i < kIterations; ++i) {
    const std::string x = payload(i);
    Options reference{kPrefix + x, vec_of(x), obj_of(x), Tracked(x)};
    std::string a = co_await take_options_and(Options{kPrefix + x, vec_of(x), obj_of(x), Tracked(x)}, co_await echo_val(x));
    check_eq(a, describe(reference) + "+" + x, "co_await f(Options{...}, co_await g())");
    std::string b = co_await take_json_and(obj_of(x), co_await echo_val(x));
    check_eq(b, json::serialize(obj_of(x)) + "+" + x, "co_await f(obj_of(x), co_await g())");
  }
}

// ---------------------------------------------------------------------- driver

struct Pattern {
  const char* name;
  const char* rule;
  awaitable<void> (*fn)();
};

#if PROBE_INITLIST_IN_AWAIT
#define INITLIST_ONLY(fn) fn
#else
#define INITLIST_ONLY(fn) nullptr
#endif

// fn == nullptr: the shape does not compile here (reported as SKIP).
const Pattern kPatterns[] = {
    {"r1_string", "1", p_r1_string},
    {"r1_string_prvalue_arg", "1+4", p_r1_string_prvalue_arg},
    {"r1_ternary", "1", p_r1_ternary},
    {"r1_ternary_local", "1", p_r1_ternary_local},
    {"r1_expr_operand", "1", p_r1_expr_operand},
    {"r1_object", "1", p_r1_object},
    {"r1_tracked", "1", p_r1_tracked},
    {"r2_concat_cref", "2", p_r2_concat_cref},
    {"r2_concat_sv", "2", p_r2_concat_sv},
    {"r2_concat_value", "2", p_r2_concat_value},
    {"r2_literal_cref", "2", p_r2_literal_cref},
    {"r2_json_cref", "2", p_r2_json_cref},
    {"r2_json_initlist_cref", "2", INITLIST_ONLY(p_r2_json_initlist_cref)},
    {"r2_expr_across_await", "2", p_r2_expr_across_await},
    {"r2_initlist_across_await", "2", INITLIST_ONLY(p_r2_initlist_across_await)},
    {"r2_args_with_await", "2", p_r2_args_with_await},
    {"r2_lifetime_extended", "2", p_r2_lifetime_extended},
    {"r3_iife_await", "3", p_r3_iife_await},
    {"r3_named_lambda", "3", p_r3_named_lambda},
    {"r3_cospawn_await", "3", p_r3_cospawn_await},
    {"r3_cospawn_detached", "3", p_r3_cospawn_detached},
    {"r3_lambda_arg", "3+4", p_r3_lambda_arg},
    {"r4_options_default", "4", p_r4_options_default},
    {"r4_options_filled", "4", p_r4_options_filled},
    {"r4_options_initlist", "4", INITLIST_ONLY(p_r4_options_initlist)},
    {"r4_json_value", "4", p_r4_json_value},
    {"r4_json_initlist", "4", INITLIST_ONLY(p_r4_json_initlist)},
    {"r4_vector", "4", p_r4_vector},
    {"r4_vector_initlist", "4", INITLIST_ONLY(p_r4_vector_initlist)},
    {"r4_tracked", "4", p_r4_tracked},
    {"r4_with_inner_await", "4", p_r4_with_inner_await},
    {"r4_aggregate_not_arg", "4", p_r4_aggregate_not_arg},
    {"x_ternary_one_arm", "none", p_x_ternary_one_arm},
    {"ctl_spawn_sv_dangling", "ctl", p_ctl_spawn_sv_dangling},
    {"ctl_cospawn_invoked", "ctl", p_ctl_cospawn_invoked},
};

bool run_pattern(const Pattern& p) {
  if (p.fn == nullptr) {
    std::printf("RESULT %s SKIP does not compile with this compiler (braced list in a co_await expression)\n", p.name);
    std::fflush(stdout);
    return true;
  }
  g_error_count = 0;
  g_first_error.clear();
  g_spawned = g_spawn_done = 0;
  Tracked::live().clear();
  Tracked::bad_destroy = Tracked::bad_use = Tracked::bad_construct = 0;
  {
    asio::io_context io;
    bool finished = false;
    std::exception_ptr failure;
    asio::co_spawn(io, p.fn(), [&](std::exception_ptr e) {
      finished = true;
      failure = e;
    });
    io.run();
    check(finished, "top-level coroutine did not finish");
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        check(false, std::string("exception: ") + e.what());
      } catch (...) {
        check(false, "unknown exception");
      }
    }
  }
  check(g_spawn_done == g_spawned,
        "detached coroutines finished " + std::to_string(g_spawn_done) + "/" + std::to_string(g_spawned));
  check(Tracked::bad_destroy == 0, std::to_string(Tracked::bad_destroy) + " Tracked destroyed twice / never built");
  check(Tracked::bad_use == 0, std::to_string(Tracked::bad_use) + " Tracked used while dead");
  check(Tracked::bad_construct == 0, std::to_string(Tracked::bad_construct) + " Tracked built over a live one");
  check(Tracked::live().empty(), std::to_string(Tracked::live().size()) + " Tracked never destroyed");
  const bool ok = g_error_count == 0;
  if (ok)
    std::printf("RESULT %s PASS\n", p.name);
  else
    std::printf("RESULT %s FAIL %d error(s); first: %s\n", p.name, g_error_count, g_first_error.c_str());
  std::fflush(stdout);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto& p : kPatterns) std::printf("%s %s\n", p.name, p.rule);
    return 0;
  }
  int failures = 0;
  if (argc == 1) {
    for (const auto& p : kPatterns)
      if (std::strncmp(p.name, "ctl_", 4) != 0 && !run_pattern(p)) ++failures;
    return failures == 0 ? 0 : 1;
  }
  for (int a = 1; a < argc; ++a) {
    bool found = false;
    for (const auto& p : kPatterns) {
      if (std::strcmp(p.name, argv[a]) != 0) continue;
      found = true;
      if (!run_pattern(p)) ++failures;
    }
    if (!found) {
      std::fprintf(stderr, "unknown pattern: %s\n", argv[a]);
      return 2;
    }
  }
  return failures == 0 ? 0 : 1;
}
