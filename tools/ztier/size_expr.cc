// File: tools/ztier/size_expr.cc
//
// A recursive-descent evaluator for the grammar in size_expr.h.
#include "size_expr.h"

#include <cctype>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

namespace ztier::tool {
namespace {

class Parser {
 public:
  Parser(std::string_view text, double ram) : text_(text), ram_(ram) {}

  Result<double> Parse() {
    ZT_ASSIGN_OR_RETURN(double v, Expr());
    SkipSpace();
    if (pos_ < text_.size()) {
      return Error(std::string("unexpected '") + text_[pos_] + "'");
    }
    if (!std::isfinite(v)) return Error("the result is not a finite number", 0);
    return v;
  }

 private:
  Result<double> Expr() {
    ZT_ASSIGN_OR_RETURN(double v, Term());
    for (;;) {
      if (Accept('+')) {
        ZT_ASSIGN_OR_RETURN(double r, Term());
        v += r;
      } else if (Accept('-')) {
        ZT_ASSIGN_OR_RETURN(double r, Term());
        v -= r;
      } else {
        return v;
      }
    }
  }

  Result<double> Term() {
    ZT_ASSIGN_OR_RETURN(double v, Power());
    for (;;) {
      const std::size_t at = pos_;
      if (Accept('*')) {
        ZT_ASSIGN_OR_RETURN(double r, Power());
        v *= r;
      } else if (Accept('/') || Accept('%')) {
        const bool mod = text_[pos_ - 1] == '%';
        ZT_ASSIGN_OR_RETURN(double r, Power());
        if (r == 0) return Error("division by zero", at + 1);
        v = mod ? std::fmod(v, r) : v / r;
      } else {
        return v;
      }
    }
  }

  // Right-associative: a^b^c is a^(b^c). Each '^' nests one level, as a
  // parenthesis does.
  Result<double> Power() {
    ZT_ASSIGN_OR_RETURN(double base, Unary());
    if (!Accept('^')) return base;
    if (++depth_ > kMaxDepth) return Error("nested too deeply");
    Result<double> exponent = Power();
    --depth_;
    if (!exponent.has_value()) return exponent;
    return std::pow(base, *exponent);
  }

  Result<double> Unary() {
    // Nesting (parentheses, signs, calls) is bounded, so a garbled file
    // cannot overflow the stack.
    if (++depth_ > kMaxDepth) return Error("nested too deeply");
    Result<double> v = UnaryBody();
    --depth_;
    return v;
  }

  Result<double> UnaryBody() {
    if (Accept('-')) {
      ZT_ASSIGN_OR_RETURN(double v, Unary());
      return -v;
    }
    if (Accept('+')) return Unary();
    return Primary();
  }

  Result<double> Primary() {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("expected a number, ram or '('");
    const char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      ZT_ASSIGN_OR_RETURN(double v, Expr());
      if (!Accept(')')) return Error("expected ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      return Number();
    }
    if (std::isalpha(static_cast<unsigned char>(c))) return Name();
    return Error(std::string("unexpected '") + c + "'");
  }

  Result<double> Number() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
            text_[pos_] == '.')) {
      ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      std::size_t p = pos_ + 1;
      if (p < text_.size() && (text_[p] == '+' || text_[p] == '-')) ++p;
      if (p < text_.size() && std::isdigit(static_cast<unsigned char>(text_[p]))) {
        while (p < text_.size() &&
               std::isdigit(static_cast<unsigned char>(text_[p]))) {
          ++p;
        }
        pos_ = p;
      }
    }
    const std::string digits(text_.substr(start, pos_ - start));
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(digits, &used);
    } catch (...) {
      used = 0;
    }
    if (used != digits.size()) {
      return Error("'" + digits + "' is not a number", start + 1);
    }
    if (pos_ < text_.size() &&
        std::isalpha(static_cast<unsigned char>(text_[pos_]))) {
      return Error("a unit after '" + digits +
                       "': sizes here are MiB, with no suffix",
                   pos_ + 1);
    }
    return v;
  }

  Result<double> Name() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
            text_[pos_] == '_')) {
      ++pos_;
    }
    const std::string name(text_.substr(start, pos_ - start));
    SkipSpace();
    const bool call = pos_ < text_.size() && text_[pos_] == '(';
    if (!call) {
      if (name == "ram") return ram_;
      if (name == "e") return std::numbers::e;
      if (name == "pi") return std::numbers::pi;
      return Error("unknown name '" + name + "' (the variable is ram)",
                   start + 1);
    }
    ++pos_;
    // fasteval's constants are functions of no argument, e() and pi(),
    // which is how a zram-generator.conf writes them.
    if ((name == "e" || name == "pi") && Accept(')')) {
      return name == "e" ? std::numbers::e : std::numbers::pi;
    }
    std::vector<double> args;
    for (;;) {
      ZT_ASSIGN_OR_RETURN(double v, Expr());
      args.push_back(v);
      if (Accept(',')) continue;
      if (Accept(')')) break;
      return Error("expected ',' or ')' in " + name + "()");
    }
    const auto want = [&](std::size_t lo, std::size_t hi) -> Status {
      if (args.size() >= lo && args.size() <= hi) return Status::Ok();
      // fasteval's round(modulus, x), which zram-generator.conf may hold.
      const std::string hint =
          name == "round" && args.size() == 2
              ? "; round(m, x) (x rounded to a multiple of m) is written "
                "round(x / m) * m"
              : "";
      return Error(name + "() takes " +
                       (lo == hi ? std::to_string(lo)
                                 : std::to_string(lo) + " or " +
                                       std::to_string(hi)) +
                       " argument(s), not " + std::to_string(args.size()) +
                       hint,
                   start + 1)
          .error();
    };
    if (name == "min" || name == "max") {
      double v = args[0];
      for (double a : args) v = name == "min" ? std::fmin(v, a) : std::fmax(v, a);
      return v;
    }
    if (name == "floor" || name == "ceil" || name == "round" ||
        name == "abs" || name == "int") {
      if (Status s = want(1, 1); !s.ok()) return Err(s);
      const double a = args[0];
      if (name == "floor") return std::floor(a);
      if (name == "ceil") return std::ceil(a);
      if (name == "round") return std::round(a);
      if (name == "abs") return std::fabs(a);
      return std::trunc(a);
    }
    if (name == "log") {
      if (Status s = want(1, 2); !s.ok()) return Err(s);
      if (args.size() == 1) return std::log10(args[0]);
      return std::log(args[1]) / std::log(args[0]);
    }
    return Error("unknown function '" + name + "()'", start + 1);
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  bool Accept(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // column 0: no column; else 1-based. By default the current position.
  Result<double> Error(const std::string& what,
                       std::size_t column = std::string::npos) const {
    if (column == std::string::npos) column = pos_ + 1;
    std::string m = "bad expression '" + std::string(text_) + "'";
    if (column != 0) m += " at column " + std::to_string(column);
    return Err(Status::InvalidArgument(m + ": " + what));
  }

  static constexpr int kMaxDepth = 200;
  std::string_view text_;
  double ram_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<double> EvalSizeExpression(std::string_view text, double ram_mib) {
  return Parser(text, ram_mib).Parse();
}

}  // namespace ztier::tool
