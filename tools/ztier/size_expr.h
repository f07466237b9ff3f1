// File: tools/ztier/size_expr.h
//
// The size expressions of zram-generator.conf(5)'s zram-size= and
// zram-resident-limit=: arithmetic over the variable `ram`, the host's
// MemTotal in MiB, whose result is a size in MiB.
//
//   EvalSizeExpression("min(ram / 2, 4096)", 24000)  ->  4096
//
// Grammar (zram-generator evaluates with the fasteval crate; this is the
// subset its documentation lists and its users write):
//   expr    := term (('+' | '-') term)*
//   term    := power (('*' | '/' | '%') power)*
//   power   := unary ('^' power)?            right-associative
//   unary   := ('+' | '-') unary | primary
//   primary := NUMBER | 'ram' | 'e' | 'pi' | 'e()' | 'pi()' | '(' expr ')'
//            | FUNC '(' expr (',' expr)* ')'
//   FUNC    := min | max (any number of arguments) | floor | ceil | round
//            | abs | int (one argument) | log (one: base 10; two: log(b, x))
// e() and pi() are fasteval's spelling of its constants, as a
// zram-generator.conf writes them; e and pi are taken too.
// Not fasteval's round(modulus, x): its error says to write round(x / m) * m.
// NUMBER is decimal, with an optional fraction and exponent ("1.5", "2e3").
// Spaces are allowed between tokens.
//
// Errors (kInvalidArgument, the message naming the column, from 1): an
// unknown name or function, a wrong number of arguments, a missing
// operand or parenthesis, trailing text, division by zero, and a result
// that is not finite, and nesting deeper than 200.
//
// Thread safety: a pure function.
#ifndef ZTIER_TOOLS_ZTIER_SIZE_EXPR_H_
#define ZTIER_TOOLS_ZTIER_SIZE_EXPR_H_

#include <string_view>

#include "ztier/status.h"

namespace ztier::tool {

Result<double> EvalSizeExpression(std::string_view text, double ram_mib);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_SIZE_EXPR_H_
