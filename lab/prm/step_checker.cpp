#include "lab/prm/step_checker.h"

#include <algorithm>
#include <cctype>

namespace agentkv::prm {
namespace {

std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with_digit(std::string_view s) { return !s.empty() && std::isdigit(static_cast<unsigned char>(s[0])); }

// Reads a non-negative integer (at most 12 digits, so products stay far from overflow).
std::optional<int64_t> read_number(std::string_view& s) {
  if (!starts_with_digit(s)) return std::nullopt;
  int64_t v = 0;
  size_t n = 0;
  while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[n]))) {
    if (n == 12) return std::nullopt;
    v = v * 10 + (s[n] - '0');
    ++n;
  }
  s.remove_prefix(n);
  return v;
}

// Recursive descent over "expr := term (('+'|'-') term)*, term := factor (('*'|'/') factor)*,
// factor := number | '(' expr ')'". Fails on anything else, and on division with a remainder or
// by zero, since the steps are claims about exact integers.
class ExprEval {
 public:
  explicit ExprEval(std::string_view s) : s_(s) {}
  std::optional<int64_t> run() {
    auto v = expr(0);
    skip();
    if (!v || !s_.empty()) return std::nullopt;
    return v;
  }
  const std::vector<int64_t>& operands() const { return operands_; }
  int n_ops() const { return n_ops_; }

 private:
  void skip() { s_ = trim_space(s_); }
  // Returns '+', '-', '*', '/' and consumes it, or 0.
  char op(bool multiplicative) {
    skip();
    static constexpr struct {
      std::string_view text;
      char op;
    } kSigns[] = {{"+", '+'}, {"-", '-'}, {"*", '*'}, {"x", '*'}, {"X", '*'},
                  {"\xc3\x97", '*'}, {"/", '/'}, {"\xc3\xb7", '/'}};
    for (const auto& sign : kSigns) {
      const bool mult = sign.op == '*' || sign.op == '/';
      if (mult == multiplicative && s_.starts_with(sign.text)) {
        s_.remove_prefix(sign.text.size());
        ++n_ops_;
        return sign.op;
      }
    }
    return 0;
  }
  std::optional<int64_t> expr(int depth) {
    auto v = term(depth);
    while (v) {
      const char o = op(false);
      if (!o) break;
      auto r = term(depth);
      if (!r) return std::nullopt;
      v = o == '+' ? *v + *r : *v - *r;
    }
    return v;
  }
  std::optional<int64_t> term(int depth) {
    auto v = factor(depth);
    while (v) {
      const char o = op(true);
      if (!o) break;
      auto r = factor(depth);
      if (!r) return std::nullopt;
      if (o == '*') {
        int64_t p;
        if (__builtin_mul_overflow(*v, *r, &p)) return std::nullopt;
        v = p;
      } else {
        if (*r == 0 || *v % *r != 0) return std::nullopt;
        v = *v / *r;
      }
    }
    return v;
  }
  std::optional<int64_t> factor(int depth) {
    skip();
    if (depth > 16) return std::nullopt;
    if (s_.starts_with("(")) {
      s_.remove_prefix(1);
      auto v = expr(depth + 1);
      skip();
      if (!v || !s_.starts_with(")")) return std::nullopt;
      s_.remove_prefix(1);
      return v;
    }
    auto n = read_number(s_);
    if (n) operands_.push_back(*n);
    return n;
  }

  std::string_view s_;
  std::vector<int64_t> operands_;
  int n_ops_ = 0;
};

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

StepCheck fail(StepCheck c, std::string why) {
  c.why = std::move(why);
  return c;
}

}  // namespace

const char* step_error_name(StepError e) {
  switch (e) {
    case StepError::kNone: return "none";
    case StepError::kFormat: return "format";
    case StepError::kArithmetic: return "arithmetic";
    case StepError::kUngrounded: return "ungrounded";
    case StepError::kOffTrack: return "off-track";
  }
  return "?";
}

StepError StepCheck::error() const {
  if (correct) return StepError::kNone;
  if (!parsed) return StepError::kFormat;
  if (!arithmetic) return StepError::kArithmetic;
  if (!grounded) return StepError::kUngrounded;
  return StepError::kOffTrack;
}

bool is_step_line(std::string_view line) {
  line = trim_space(line);
  if (!line.starts_with("Step")) return false;
  line.remove_prefix(4);
  return starts_with_digit(trim_space(line));
}

bool is_answer_line(std::string_view line) { return trim_space(line).starts_with("Answer"); }

StepCheck check_step(std::string_view line, int expected_index, const ArithProblem& problem,
                     const std::vector<int64_t>& available) {
  StepCheck c;
  c.line = std::string(trim_space(line));
  std::string_view s = trim_space(line);
  if (!is_step_line(s)) return fail(c, "not a step line");
  s = trim_space(s.substr(4));
  const auto k = read_number(s);
  if (!k || !s.starts_with(":")) return fail(c, "expected 'Step k:'");
  if (*k != expected_index) return fail(c, "step number " + std::to_string(*k) + ", expected " +
                                               std::to_string(expected_index));
  s.remove_prefix(1);
  const size_t eq = s.rfind('=');
  if (eq == std::string_view::npos) return fail(c, "no '='");
  std::string_view rhs = trim_space(s.substr(eq + 1));
  const auto stated = read_number(rhs);
  // Words after the number ("= 15 apples.") are allowed; a second number or sign is not.
  const bool clean_tail = std::none_of(rhs.begin(), rhs.end(), [](char ch) {
    return std::isdigit(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '*' || ch == '/';
  });
  if (!stated || !clean_tail || (!rhs.empty() && std::isalnum(static_cast<unsigned char>(rhs[0])))) {
    return fail(c, "the result is not a whole number");
  }
  c.stated = *stated;
  ExprEval ev(s.substr(0, eq));
  const auto value = ev.run();
  c.operands = ev.operands();
  if (!value) return fail(c, "the expression does not parse or does not divide exactly");
  if (ev.n_ops() == 0) return fail(c, "no operation");
  c.parsed = true;
  c.arithmetic = *value == c.stated;
  c.grounded = std::all_of(c.operands.begin(), c.operands.end(), [&](int64_t x) { return contains(available, x); });
  c.on_track = std::any_of(problem.reference.begin(), problem.reference.end(),
                           [&](const ArithStep& r) { return r.result == c.stated; });
  c.correct = c.arithmetic && c.grounded && c.on_track;
  if (!c.arithmetic) c.why = "arithmetic: the expression is " + std::to_string(*value);
  else if (!c.grounded) c.why = "uses a number that is neither in the problem nor an earlier result";
  else if (!c.on_track) c.why = "the result is not on the way to the answer";
  return c;
}

SolutionCheck check_lines(std::span<const std::string> lines, const ArithProblem& problem) {
  SolutionCheck out;
  std::vector<int64_t> available = problem.quantities;
  std::optional<int64_t> answer_line;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view t = trim_space(lines[i]);
    if (is_step_line(t)) {
      StepCheck c = check_step(t, int(out.steps.size()) + 1, problem, available);
      if (c.correct) available.push_back(c.stated);
      out.steps.push_back(std::move(c));
      out.step_line.push_back(i);
    } else if (t.starts_with("Answer:")) {
      t = trim_space(t.substr(7));
      if (auto v = read_number(t)) answer_line = *v;
    }
  }
  out.final_answer = answer_line;
  if (!out.final_answer && !out.steps.empty() && out.steps.back().parsed) out.final_answer = out.steps.back().stated;
  out.answer_correct = out.final_answer && *out.final_answer == problem.answer;
  out.all_steps_correct = !out.steps.empty() && std::all_of(out.steps.begin(), out.steps.end(),
                                                            [](const StepCheck& c) { return c.correct; });
  return out;
}

SolutionCheck check_solution(std::string_view solution, const ArithProblem& problem) {
  std::vector<std::string> lines;
  while (!solution.empty()) {
    const size_t nl = solution.find('\n');
    lines.emplace_back(solution.substr(0, nl));
    solution = nl == std::string_view::npos ? std::string_view() : solution.substr(nl + 1);
  }
  return check_lines(lines, problem);
}

}  // namespace agentkv::prm
