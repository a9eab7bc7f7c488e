//! The built-in `calculator` tool that agents call: it turns an arithmetic
//! expression such as `2 * (3 + 4) ^ 2 / sqrt(16)` into a number. A model writes
//! the input, so this is a small parser of its own (never an `eval`). The input
//! size and the nesting depth have limits, so no expression can exhaust the
//! stack. Every problem comes back as a plain sentence that the model can act
//! on. Positions in error messages count characters, starting at 1.
//!
//! Grammar, from the loosest binding to the tightest:
//!
//! ```text
//! sum      := product (('+' | '-') product)*
//! product  := unary (('*' | '×' | '/' | '÷' | '%') unary)*
//! unary    := ('+' | '-') unary | power
//! power    := primary (('^' | '**') unary)?        right-associative
//! primary  := number | constant | function '(' arguments ')' | '(' sum ')'
//! ```
//!
//! A unary operator on the left binds more loosely than `^`, so `-2^2` is `-4`.
//! The exponent may carry its own sign: `2^-1` is `0.5`. `%` is the truncated
//! remainder, so the result has the sign of the dividend (`-7 % 3` is `-1`), as
//! in C and JavaScript. Trigonometric functions work in radians.

use std::f64::consts;

/// Longest accepted expression, in characters. Real calculations are far
/// shorter, and this bounds the work one tool call can cause.
pub const MAX_EXPRESSION_CHARS: usize = 1_000;

/// Deepest accepted nesting. Parentheses, function calls, unary signs and
/// exponents each add one level. Each level is a few stack frames, so this limit
/// bounds the recursion.
pub const MAX_NESTING_DEPTH: usize = 64;

/// Evaluates `expression`. The result is always finite: division by zero,
/// overflow and domain errors come back as `Err` with an explanation.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    let length = expression.chars().count();
    if length > MAX_EXPRESSION_CHARS {
        return Err(format!(
            "expression too long: {length} characters, at most {MAX_EXPRESSION_CHARS} allowed"
        ));
    }
    let tokens = tokenize(expression)?;
    let mut parser = Parser::new(tokens, length);
    if parser.peek().kind == TokenKind::End {
        return Err("empty expression".to_string());
    }
    // The whole expression is parsed before any arithmetic. A syntax error
    // later in the input therefore comes before "division by zero" in an
    // earlier part, because the syntax error is what the model must fix first.
    let tree = parser.parse_sum(0)?;
    parser.expect_end()?;
    finite(tree.evaluate()?)
}

/// Formats a result for the model and the chat transcript. An integer below
/// 1e15 in magnitude prints without a fractional part (`14`, not `14.0`). Any
/// other value prints in its shortest round-trip form. Very large and very small
/// magnitudes use exponent notation (`1e20`, `1.5e-7`) instead of long runs of
/// zeros.
pub fn format_number(value: f64) -> String {
    let magnitude = value.abs();
    if value.is_finite() && value.fract() == 0.0 && magnitude < 1e15 {
        // Below 1e15 the cast to i64 is exact. It also turns -0 into "0".
        return format!("{}", value as i64);
    }
    if value.is_finite() && !(1e-6..1e15).contains(&magnitude) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

// ---------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, PartialEq)]
enum TokenKind {
    Number(f64),
    Name(String),
    Plus,
    Minus,
    Times,
    Divide,
    Modulo,
    Power,
    OpenParen,
    CloseParen,
    Comma,
    End,
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokenKind,
    /// The token's first character, counted from 1.
    position: usize,
    /// The token as written, so error messages quote what the model typed.
    text: String,
}

fn tokenize(expression: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expression.chars().collect();
    let mut tokens = Vec::new();
    let mut index = 0;
    while let Some(&current) = chars.get(index) {
        let position = index + 1;
        if current.is_whitespace() {
            index += 1;
            continue;
        }
        if current.is_ascii_digit() || current == '.' {
            let end = number_end(&chars, index);
            let text: String = chars[index..end].iter().collect();
            let value = parse_number(&text, position)?;
            tokens.push(Token {
                kind: TokenKind::Number(value),
                position,
                text,
            });
            index = end;
            continue;
        }
        if current.is_ascii_alphabetic() || current == '_' {
            let mut end = index;
            while chars
                .get(end)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
            {
                end += 1;
            }
            let text: String = chars[index..end].iter().collect();
            tokens.push(Token {
                kind: TokenKind::Name(text.clone()),
                position,
                text,
            });
            index = end;
            continue;
        }
        let (kind, width) = match current {
            '+' => (TokenKind::Plus, 1),
            // U+2212 MINUS SIGN: models copy it from typeset math.
            '-' | '\u{2212}' => (TokenKind::Minus, 1),
            '*' if chars.get(index + 1) == Some(&'*') => (TokenKind::Power, 2),
            '*' | '×' => (TokenKind::Times, 1),
            '/' | '÷' => (TokenKind::Divide, 1),
            '%' => (TokenKind::Modulo, 1),
            '^' => (TokenKind::Power, 1),
            '(' => (TokenKind::OpenParen, 1),
            ')' => (TokenKind::CloseParen, 1),
            ',' => (TokenKind::Comma, 1),
            other => {
                return Err(format!(
                    "unexpected character '{other}' at position {position}"
                ));
            }
        };
        let text: String = chars[index..index + width].iter().collect();
        tokens.push(Token {
            kind,
            position,
            text,
        });
        index += width;
    }
    Ok(tokens)
}

/// The index just past the number that starts at `start`. The forms are
/// `12`, `3.5`, `.5`, `5.`, and any of those with an exponent (`1e3`, `2.5E-3`).
/// An `e` that no digit follows is not part of the number, so `2e` stays a
/// number followed by the constant `e`. The parser then rejects the pair with a
/// clear message.
fn number_end(chars: &[char], start: usize) -> usize {
    let is_digit = |index: usize| chars.get(index).is_some_and(char::is_ascii_digit);
    let mut end = start;
    while is_digit(end) {
        end += 1;
    }
    if chars.get(end) == Some(&'.') {
        end += 1;
        while is_digit(end) {
            end += 1;
        }
    }
    if matches!(chars.get(end), Some('e' | 'E')) {
        let sign_width = usize::from(matches!(chars.get(end + 1), Some('+' | '-')));
        if is_digit(end + 1 + sign_width) {
            end += 1 + sign_width;
            while is_digit(end) {
                end += 1;
            }
        }
    }
    end
}

fn parse_number(text: &str, position: usize) -> Result<f64, String> {
    let has_mantissa_digit = text
        .chars()
        .take_while(|c| !matches!(c, 'e' | 'E'))
        .any(|c| c.is_ascii_digit());
    if !has_mantissa_digit {
        return Err(format!("invalid number '{text}' at position {position}"));
    }
    let value: f64 = text
        .parse()
        .map_err(|_| format!("invalid number '{text}' at position {position}"))?;
    if !value.is_finite() {
        return Err(format!(
            "number '{text}' at position {position} is too large"
        ));
    }
    Ok(value)
}

// ---------------------------------------------------------------------------
// Syntax tree

#[derive(Debug, Clone, Copy, PartialEq)]
enum BinaryOperator {
    Add,
    Subtract,
    Multiply,
    Divide,
    Modulo,
    Power,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Function {
    Sqrt,
    Abs,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Ln,
    Log10,
    Log2,
    Exp,
    Floor,
    Ceil,
    Round,
    Min,
    Max,
    Pow,
}

enum Arity {
    Exactly(usize),
    AtLeast(usize),
}

impl Function {
    /// `lowercase_name` must already be lowercased, because names ignore case.
    fn from_name(lowercase_name: &str) -> Option<Function> {
        Some(match lowercase_name {
            "sqrt" => Function::Sqrt,
            "abs" => Function::Abs,
            "sin" => Function::Sin,
            "cos" => Function::Cos,
            "tan" => Function::Tan,
            "asin" => Function::Asin,
            "acos" => Function::Acos,
            "atan" => Function::Atan,
            "ln" => Function::Ln,
            "log" => Function::Log10,
            "log2" => Function::Log2,
            "exp" => Function::Exp,
            "floor" => Function::Floor,
            "ceil" => Function::Ceil,
            "round" => Function::Round,
            "min" => Function::Min,
            "max" => Function::Max,
            "pow" => Function::Pow,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Function::Sqrt => "sqrt",
            Function::Abs => "abs",
            Function::Sin => "sin",
            Function::Cos => "cos",
            Function::Tan => "tan",
            Function::Asin => "asin",
            Function::Acos => "acos",
            Function::Atan => "atan",
            Function::Ln => "ln",
            Function::Log10 => "log",
            Function::Log2 => "log2",
            Function::Exp => "exp",
            Function::Floor => "floor",
            Function::Ceil => "ceil",
            Function::Round => "round",
            Function::Min => "min",
            Function::Max => "max",
            Function::Pow => "pow",
        }
    }

    fn arity(self) -> Arity {
        match self {
            Function::Min | Function::Max => Arity::AtLeast(1),
            Function::Pow => Arity::Exactly(2),
            _ => Arity::Exactly(1),
        }
    }

    fn check_arity(self, count: usize, position: usize) -> Result<(), String> {
        let name = self.name();
        match self.arity() {
            Arity::Exactly(expected) if count != expected => {
                let noun = if expected == 1 {
                    "argument"
                } else {
                    "arguments"
                };
                Err(format!(
                    "{name}() at position {position} takes {expected} {noun}, got {count}"
                ))
            }
            Arity::AtLeast(minimum) if count < minimum => {
                let noun = if minimum == 1 {
                    "argument"
                } else {
                    "arguments"
                };
                Err(format!(
                    "{name}() at position {position} takes at least {minimum} {noun}, got {count}"
                ))
            }
            _ => Ok(()),
        }
    }

    fn apply(self, arguments: &[f64]) -> Result<f64, String> {
        let name = self.name();
        let value = match (self, arguments) {
            (Function::Sqrt, [x]) if *x < 0.0 => return Err("sqrt of a negative number".into()),
            (Function::Sqrt, [x]) => x.sqrt(),
            (Function::Abs, [x]) => x.abs(),
            (Function::Sin, [x]) => x.sin(),
            (Function::Cos, [x]) => x.cos(),
            (Function::Tan, [x]) => x.tan(),
            (Function::Asin | Function::Acos, [x]) if !(-1.0..=1.0).contains(x) => {
                return Err(format!("{name} is only defined between -1 and 1"));
            }
            (Function::Asin, [x]) => x.asin(),
            (Function::Acos, [x]) => x.acos(),
            (Function::Atan, [x]) => x.atan(),
            (Function::Ln | Function::Log10 | Function::Log2, [x]) if *x <= 0.0 => {
                return Err(format!("{name} of zero or a negative number"));
            }
            (Function::Ln, [x]) => x.ln(),
            (Function::Log10, [x]) => x.log10(),
            (Function::Log2, [x]) => x.log2(),
            (Function::Exp, [x]) => x.exp(),
            (Function::Floor, [x]) => x.floor(),
            (Function::Ceil, [x]) => x.ceil(),
            (Function::Round, [x]) => x.round(),
            (Function::Min, [first, rest @ ..]) => rest.iter().fold(*first, |a, b| a.min(*b)),
            (Function::Max, [first, rest @ ..]) => rest.iter().fold(*first, |a, b| a.max(*b)),
            (Function::Pow, [base, exponent]) => return power(*base, *exponent),
            // The parser checks arity first, so this arm is only a fallback that
            // avoids a panic.
            _ => return Err(format!("{name}() got the wrong number of arguments")),
        };
        finite(value)
    }
}

#[derive(Debug)]
enum Expr {
    Number(f64),
    Negate(Box<Expr>),
    Binary(BinaryOperator, Box<Expr>, Box<Expr>),
    Call(Function, Vec<Expr>),
}

impl Expr {
    /// Recursion here follows the tree, and the tree depth has a bound. Nesting
    /// is limited to [`MAX_NESTING_DEPTH`]. A flat chain such as `1+1+…` is
    /// limited by [`MAX_EXPRESSION_CHARS`] to about 500 levels.
    fn evaluate(&self) -> Result<f64, String> {
        match self {
            Expr::Number(value) => Ok(*value),
            Expr::Negate(operand) => Ok(-operand.evaluate()?),
            Expr::Binary(operator, left, right) => {
                let (left, right) = (left.evaluate()?, right.evaluate()?);
                match operator {
                    BinaryOperator::Add => finite(left + right),
                    BinaryOperator::Subtract => finite(left - right),
                    BinaryOperator::Multiply => finite(left * right),
                    BinaryOperator::Divide if right == 0.0 => Err("division by zero".into()),
                    BinaryOperator::Divide => finite(left / right),
                    BinaryOperator::Modulo if right == 0.0 => {
                        Err("division by zero (modulo by 0)".into())
                    }
                    BinaryOperator::Modulo => finite(left % right),
                    BinaryOperator::Power => power(left, right),
                }
            }
            Expr::Call(function, arguments) => {
                let values = arguments
                    .iter()
                    .map(Expr::evaluate)
                    .collect::<Result<Vec<f64>, String>>()?;
                function.apply(&values)
            }
        }
    }
}

fn power(base: f64, exponent: f64) -> Result<f64, String> {
    if base == 0.0 && exponent < 0.0 {
        return Err("division by zero (0 raised to a negative power)".into());
    }
    if base < 0.0 && exponent.fract() != 0.0 {
        return Err("a negative number raised to a fractional power is not a real number".into());
    }
    finite(base.powf(exponent))
}

fn finite(value: f64) -> Result<f64, String> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err("result is not a finite number".into())
    }
}

// ---------------------------------------------------------------------------
// Parser

struct Parser {
    tokens: Vec<Token>,
    index: usize,
    /// Returned once the tokens run out, so `peek` never indexes past the end.
    end: Token,
}

impl Parser {
    fn new(tokens: Vec<Token>, length_in_chars: usize) -> Parser {
        let end = Token {
            kind: TokenKind::End,
            position: length_in_chars + 1,
            text: String::new(),
        };
        Parser {
            tokens,
            index: 0,
            end,
        }
    }

    fn peek(&self) -> &Token {
        self.tokens.get(self.index).unwrap_or(&self.end)
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if token.kind != TokenKind::End {
            self.index += 1;
        }
        token
    }

    fn parse_sum(&mut self, depth: usize) -> Result<Expr, String> {
        let mut left = self.parse_product(depth)?;
        loop {
            let operator = match self.peek().kind {
                TokenKind::Plus => BinaryOperator::Add,
                TokenKind::Minus => BinaryOperator::Subtract,
                _ => return Ok(left),
            };
            self.advance();
            let right = self.parse_product(depth)?;
            left = Expr::Binary(operator, Box::new(left), Box::new(right));
        }
    }

    fn parse_product(&mut self, depth: usize) -> Result<Expr, String> {
        let mut left = self.parse_unary(depth)?;
        loop {
            let operator = match self.peek().kind {
                TokenKind::Times => BinaryOperator::Multiply,
                TokenKind::Divide => BinaryOperator::Divide,
                TokenKind::Modulo => BinaryOperator::Modulo,
                _ => return Ok(left),
            };
            self.advance();
            let right = self.parse_unary(depth)?;
            left = Expr::Binary(operator, Box::new(left), Box::new(right));
        }
    }

    fn parse_unary(&mut self, depth: usize) -> Result<Expr, String> {
        match self.peek().kind {
            TokenKind::Plus => {
                self.advance();
                self.parse_unary(deeper(depth)?)
            }
            TokenKind::Minus => {
                self.advance();
                Ok(Expr::Negate(Box::new(self.parse_unary(deeper(depth)?)?)))
            }
            _ => self.parse_power(depth),
        }
    }

    fn parse_power(&mut self, depth: usize) -> Result<Expr, String> {
        let base = self.parse_primary(depth)?;
        if self.peek().kind != TokenKind::Power {
            return Ok(base);
        }
        self.advance();
        // The exponent is parsed as a unary, so it may carry a sign (`2^-1`)
        // and may itself be a power. That makes `^` right-associative.
        let exponent = self.parse_unary(deeper(depth)?)?;
        Ok(Expr::Binary(
            BinaryOperator::Power,
            Box::new(base),
            Box::new(exponent),
        ))
    }

    fn parse_primary(&mut self, depth: usize) -> Result<Expr, String> {
        let token = self.advance();
        match &token.kind {
            TokenKind::Number(value) => Ok(Expr::Number(*value)),
            TokenKind::OpenParen => {
                let inner = self.parse_sum(deeper(depth)?)?;
                self.expect_close(&token)?;
                Ok(inner)
            }
            TokenKind::Name(name) => {
                let lowercase_name = name.to_ascii_lowercase();
                if self.peek().kind == TokenKind::OpenParen {
                    self.parse_call(&token, &lowercase_name, depth)
                } else {
                    constant(&token, &lowercase_name)
                }
            }
            TokenKind::End => Err(format!(
                "unexpected end of expression at position {}: expected a number, a constant, \
                 a function or '('",
                token.position
            )),
            _ => Err(format!(
                "unexpected '{}' at position {}",
                token.text, token.position
            )),
        }
    }

    fn parse_call(
        &mut self,
        name_token: &Token,
        lowercase_name: &str,
        depth: usize,
    ) -> Result<Expr, String> {
        let Some(function) = Function::from_name(lowercase_name) else {
            return Err(format!(
                "unknown function '{}' at position {}",
                name_token.text, name_token.position
            ));
        };
        let open = self.advance();
        let inner_depth = deeper(depth)?;
        let mut arguments = Vec::new();
        if self.peek().kind != TokenKind::CloseParen {
            loop {
                arguments.push(self.parse_sum(inner_depth)?);
                if self.peek().kind != TokenKind::Comma {
                    break;
                }
                self.advance();
            }
        }
        self.expect_close(&open)?;
        function.check_arity(arguments.len(), name_token.position)?;
        Ok(Expr::Call(function, arguments))
    }

    fn expect_close(&mut self, open: &Token) -> Result<(), String> {
        match self.peek().kind {
            TokenKind::CloseParen => {
                self.advance();
                Ok(())
            }
            TokenKind::End => Err(format!(
                "missing ')' to close the '(' at position {}",
                open.position
            )),
            _ => Err(unexpected_after_operand(self.peek(), "expected ')'")),
        }
    }

    fn expect_end(&self) -> Result<(), String> {
        match self.peek().kind {
            TokenKind::End => Ok(()),
            _ => Err(unexpected_after_operand(
                self.peek(),
                "expected an operator",
            )),
        }
    }
}

/// Describes a token that appears where an operator or a closing parenthesis
/// should be. It adds a hint for the two mistakes models make most often.
fn unexpected_after_operand(token: &Token, expectation: &str) -> String {
    let hint = match token.kind {
        TokenKind::Comma => "; numbers must not contain thousands separators",
        TokenKind::Number(_) | TokenKind::Name(_) | TokenKind::OpenParen => {
            "; write '*' to multiply"
        }
        _ => "",
    };
    format!(
        "unexpected '{}' at position {} ({expectation}{hint})",
        token.text, token.position
    )
}

fn constant(token: &Token, lowercase_name: &str) -> Result<Expr, String> {
    match lowercase_name {
        "pi" => Ok(Expr::Number(consts::PI)),
        "e" => Ok(Expr::Number(consts::E)),
        _ if Function::from_name(lowercase_name).is_some() => Err(format!(
            "function '{}' at position {} needs its arguments in parentheses, e.g. {}(2)",
            token.text, token.position, lowercase_name
        )),
        _ => Err(format!(
            "unknown constant '{}' at position {} (known constants: pi, e)",
            token.text, token.position
        )),
    }
}

fn deeper(depth: usize) -> Result<usize, String> {
    if depth >= MAX_NESTING_DEPTH {
        Err(format!(
            "expression too deeply nested (at most {MAX_NESTING_DEPTH} levels)"
        ))
    } else {
        Ok(depth + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(expression: &str) -> f64 {
        match evaluate(expression) {
            Ok(value) => value,
            Err(error) => panic!("{expression:?} failed: {error}"),
        }
    }

    fn assert_value(expression: &str, expected: f64) {
        let actual = value(expression);
        assert!(
            (actual - expected).abs() <= 1e-12 * expected.abs().max(1.0),
            "{expression:?} = {actual}, expected {expected}"
        );
    }

    fn error(expression: &str) -> String {
        match evaluate(expression) {
            Ok(value) => panic!("{expression:?} should fail, got {value}"),
            Err(error) => error,
        }
    }

    fn assert_error(expression: &str, expected_fragment: &str) {
        let message = error(expression);
        assert!(
            message.contains(expected_fragment),
            "{expression:?}: {message:?} does not contain {expected_fragment:?}"
        );
    }

    #[test]
    fn examples_from_the_tool_description() {
        assert_eq!(value("2*(3+4)"), 14.0);
        assert_eq!(value("10/4"), 2.5);
        assert_eq!(value("2^3^2"), 512.0);
        assert_eq!(value("7%3"), 1.0);
    }

    #[test]
    fn numbers() {
        assert_eq!(value("12"), 12.0);
        assert_eq!(value("3.5"), 3.5);
        assert_eq!(value(".5"), 0.5);
        assert_eq!(value("5."), 5.0);
        assert_eq!(value("1e3"), 1000.0);
        assert_eq!(value("2.5E-3"), 0.0025);
        assert_eq!(value("1e+2"), 100.0);
        assert_eq!(value("007"), 7.0);
        assert_eq!(value("0"), 0.0);
    }

    #[test]
    fn precedence() {
        assert_eq!(value("2+3*4"), 14.0);
        assert_eq!(value("2*3+4"), 10.0);
        assert_eq!(value("10-6/2"), 7.0);
        assert_eq!(value("2+3^2"), 11.0);
        assert_eq!(value("2*3^2"), 18.0);
        assert_eq!(value("1+7%3"), 2.0);
        assert_eq!(value("(2+3)*4"), 20.0);
        assert_eq!(value("-2^2"), -4.0);
        assert_eq!(value("(-2)^2"), 4.0);
        assert_eq!(value("2^-1"), 0.5);
        assert_eq!(value("2^-1^2"), 0.5); // 2^(-(1^2))
        assert_eq!(value("-2**2"), -4.0);
        assert_eq!(value("3*-2"), -6.0);
        assert_eq!(value("-3*-3"), 9.0);
    }

    #[test]
    fn associativity() {
        assert_eq!(value("10-4-3"), 3.0);
        assert_eq!(value("100/10/5"), 2.0);
        assert_eq!(value("2**3**2"), 512.0);
        assert_eq!(value("2^3**2"), 512.0);
        assert_eq!(value("(2^3)^2"), 64.0);
        assert_eq!(value("20%7%4"), 2.0);
        assert_eq!(value("12/3*2"), 8.0);
    }

    #[test]
    fn unary_chains() {
        assert_eq!(value("--3"), 3.0);
        assert_eq!(value("---3"), -3.0);
        assert_eq!(value("+-+3"), -3.0);
        assert_eq!(value("+3"), 3.0);
        assert_eq!(value("1--1"), 2.0);
        assert_eq!(value("1+-1"), 0.0);
        assert_eq!(value("-(2+3)"), -5.0);
        assert_eq!(value("\u{2212}4"), -4.0);
    }

    #[test]
    fn modulo_keeps_the_sign_of_the_dividend() {
        assert_eq!(value("-7%3"), -1.0);
        assert_eq!(value("7%-3"), 1.0);
        assert_eq!(value("5.5%2"), 1.5);
    }

    #[test]
    fn multiplication_and_division_aliases() {
        assert_eq!(value("3×4"), 12.0);
        assert_eq!(value("12÷4"), 3.0);
        assert_eq!(value("2 × (1 + 1) ÷ 4"), 1.0);
    }

    #[test]
    fn whitespace_anywhere() {
        assert_eq!(value("  2 *\t( 3 +\n4 )  "), 14.0);
        assert_eq!(value("sqrt ( 16 )"), 4.0);
        assert_eq!(value("max( 1 , 2 , 3 )"), 3.0);
        assert_eq!(value("- - 3"), 3.0);
    }

    #[test]
    fn functions() {
        assert_eq!(value("sqrt(16)"), 4.0);
        assert_eq!(value("abs(-3.5)"), 3.5);
        assert_value("sin(pi/2)", 1.0);
        assert_value("cos(0)", 1.0);
        assert_value("tan(pi/4)", 1.0);
        assert_value("asin(1)", consts::FRAC_PI_2);
        assert_value("acos(1)", 0.0);
        assert_value("atan(1)", consts::FRAC_PI_4);
        assert_value("ln(e)", 1.0);
        assert_value("log(1000)", 3.0);
        assert_value("log2(8)", 3.0);
        assert_value("exp(1)", consts::E);
        assert_eq!(value("floor(2.7)"), 2.0);
        assert_eq!(value("floor(-2.5)"), -3.0);
        assert_eq!(value("ceil(2.1)"), 3.0);
        assert_eq!(value("round(2.5)"), 3.0);
        assert_eq!(value("round(-2.5)"), -3.0);
        assert_eq!(value("min(3)"), 3.0);
        assert_eq!(value("min(3, -1, 2)"), -1.0);
        assert_eq!(value("max(3, -1, 2)"), 3.0);
        assert_eq!(value("pow(2, 10)"), 1024.0);
        assert_eq!(value("sqrt(sqrt(16)) + max(1, min(5, 2*3))"), 7.0);
        assert_eq!(value("-sqrt(4)^2"), -4.0);
    }

    #[test]
    fn names_ignore_case() {
        assert_eq!(value("SQRT(9)"), 3.0);
        assert_eq!(value("Max(1, 2)"), 2.0);
        assert_value("PI", consts::PI);
        assert_value("E", consts::E);
        assert_value("Log2(4)", 2.0);
    }

    #[test]
    fn constants() {
        assert_value("pi", consts::PI);
        assert_value("e", consts::E);
        assert_value("2*pi", 2.0 * consts::PI);
        assert_value("e^2", consts::E * consts::E);
        assert_value("-pi", -consts::PI);
    }

    #[test]
    fn syntax_errors_name_the_position() {
        assert_eq!(
            error("1+2)"),
            "unexpected ')' at position 4 (expected an operator)"
        );
        assert_eq!(
            error("(1+2))"),
            "unexpected ')' at position 6 (expected an operator)"
        );
        assert_eq!(error("()"), "unexpected ')' at position 2");
        assert_eq!(error("1 + * 2"), "unexpected '*' at position 5");
        assert_eq!(error("*2"), "unexpected '*' at position 1");
        assert_error("1+", "unexpected end of expression at position 3");
        assert_error("2^", "unexpected end of expression at position 3");
        assert_error("2 * * 3", "unexpected '*' at position 5");
        assert_error("1 $ 2", "unexpected character '$' at position 3");
        assert_error("3×÷4", "unexpected '÷' at position 3");
        assert_error("max(1 2)", "unexpected '2' at position 7 (expected ')'");
        assert_error("max(1,)", "unexpected ')' at position 7");
        assert_error("max(,1)", "unexpected ',' at position 5");
    }

    #[test]
    fn missing_close_paren() {
        assert_eq!(error("(1+2"), "missing ')' to close the '(' at position 1");
        assert_eq!(
            error("2*(3+(4"),
            "missing ')' to close the '(' at position 6"
        );
        assert_error("sqrt(4", "missing ')'");
        assert_error("max(1, 2", "missing ')'");
    }

    #[test]
    fn empty_expression() {
        assert_eq!(error(""), "empty expression");
        assert_eq!(error("   \t\n"), "empty expression");
    }

    #[test]
    fn thousands_separators_are_rejected_with_a_hint() {
        let message = error("1,000");
        assert!(
            message.starts_with("unexpected ',' at position 2"),
            "{message}"
        );
        assert!(message.contains("thousands separators"), "{message}");
        assert_error("(1,000 + 1)", "thousands separators");
    }

    #[test]
    fn implicit_multiplication_is_rejected_with_a_hint() {
        assert_error("2pi", "unexpected 'pi' at position 2");
        assert_error("2pi", "write '*' to multiply");
        assert_error("2(3)", "unexpected '(' at position 2");
        assert_error("(2)(3)", "write '*' to multiply");
        assert_error("2 3", "unexpected '3' at position 3");
        assert_error("2e", "unexpected 'e' at position 2");
    }

    #[test]
    fn invalid_numbers() {
        assert_eq!(error("."), "invalid number '.' at position 1");
        assert_error("1 + .e5", "invalid number '.e5' at position 5");
        assert_error("1.2.3", "unexpected '.3' at position 4");
        assert_error("1e999", "number '1e999' at position 1 is too large");
    }

    #[test]
    fn unknown_names() {
        assert_eq!(error("foo(1)"), "unknown function 'foo' at position 1");
        assert_error("2 + Foo(1)", "unknown function 'Foo' at position 5");
        assert_error("x + 1", "unknown constant 'x' at position 1");
        assert_error(
            "sqrt",
            "function 'sqrt' at position 1 needs its arguments in parentheses",
        );
        assert_error("sqrt 4", "needs its arguments in parentheses");
    }

    #[test]
    fn wrong_arity_names_the_function() {
        assert_eq!(
            error("sqrt()"),
            "sqrt() at position 1 takes 1 argument, got 0"
        );
        assert_eq!(
            error("sqrt(1, 2)"),
            "sqrt() at position 1 takes 1 argument, got 2"
        );
        assert_eq!(
            error("pow(2)"),
            "pow() at position 1 takes 2 arguments, got 1"
        );
        assert_eq!(
            error("pow(1,2,3)"),
            "pow() at position 1 takes 2 arguments, got 3"
        );
        assert_eq!(
            error("min()"),
            "min() at position 1 takes at least 1 argument, got 0"
        );
        assert_error("1 + max()", "max() at position 5 takes at least 1 argument");
    }

    #[test]
    fn division_by_zero() {
        assert_eq!(error("1/0"), "division by zero");
        assert_eq!(error("1/(2-2)"), "division by zero");
        assert_eq!(error("0/0"), "division by zero");
        assert_error("5%0", "division by zero");
        assert_error("0^-1", "division by zero");
        assert_error("pow(0, -2)", "division by zero");
    }

    #[test]
    fn domain_errors() {
        assert_eq!(error("sqrt(-1)"), "sqrt of a negative number");
        assert_eq!(error("ln(0)"), "ln of zero or a negative number");
        assert_eq!(error("log(-10)"), "log of zero or a negative number");
        assert_eq!(error("log2(0)"), "log2 of zero or a negative number");
        assert_eq!(error("asin(2)"), "asin is only defined between -1 and 1");
        assert_eq!(error("acos(-1.5)"), "acos is only defined between -1 and 1");
        assert_error("(-8)^(1/3)", "not a real number");
        assert_eq!(value("(-8)^3"), -512.0);
        assert_eq!(value("sqrt(0)"), 0.0);
    }

    #[test]
    fn results_are_always_finite() {
        assert_eq!(error("10^400"), "result is not a finite number");
        assert_eq!(error("exp(1000)"), "result is not a finite number");
        assert_eq!(error("1e308*10"), "result is not a finite number");
        assert_eq!(error("-1e308-1e308"), "result is not a finite number");
        assert_eq!(error("pow(10, 309)"), "result is not a finite number");
    }

    #[test]
    fn syntax_errors_come_before_arithmetic_errors() {
        assert_error("1/0 + )", "unexpected ')' at position 7");
    }

    #[test]
    fn length_limit() {
        let longest = format!("1{}", "+1".repeat((MAX_EXPRESSION_CHARS - 1) / 2));
        assert_eq!(longest.chars().count(), MAX_EXPRESSION_CHARS - 1);
        assert_eq!(value(&longest), 500.0);
        let exactly_at_limit = format!("{longest} ");
        assert_eq!(value(&exactly_at_limit), 500.0);
        let too_long = format!("{longest}  ");
        assert_error(&too_long, "expression too long");
        // The limit counts characters, not bytes.
        let multibyte = format!("2{}", "×1".repeat((MAX_EXPRESSION_CHARS - 1) / 2));
        assert_eq!(value(&multibyte), 2.0);
    }

    #[test]
    fn nesting_limit() {
        let depth = MAX_NESTING_DEPTH;
        let deepest = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
        assert_eq!(value(&deepest), 1.0);
        let too_deep = format!("{}1{}", "(".repeat(depth + 1), ")".repeat(depth + 1));
        assert_error(&too_deep, "too deeply nested");

        assert_eq!(value(&format!("{}3", "-".repeat(depth))), 3.0);
        assert_error(&format!("{}3", "-".repeat(depth + 1)), "too deeply nested");

        let nested_calls = format!("{}4{}", "abs(".repeat(depth + 1), ")".repeat(depth + 1));
        assert_error(&nested_calls, "too deeply nested");

        let power_tower = format!("1{}", "^1".repeat(depth + 1));
        assert_error(&power_tower, "too deeply nested");
    }

    #[test]
    fn hostile_inputs_fail_cleanly_without_overflowing_the_stack() {
        let opens = "(".repeat(MAX_EXPRESSION_CHARS);
        assert_error(&opens, "too deeply nested");
        let minuses = "-".repeat(MAX_EXPRESSION_CHARS);
        assert_error(&minuses, "too deeply nested");
        let closes = ")".repeat(MAX_EXPRESSION_CHARS);
        assert_error(&closes, "unexpected ')' at position 1");
        let huge = "9".repeat(MAX_EXPRESSION_CHARS + 1);
        assert_error(&huge, "expression too long");
        assert_error(&"9".repeat(400), "is too large");
    }

    #[test]
    fn format_number_drops_the_fraction_of_integers() {
        assert_eq!(format_number(14.0), "14");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(-0.0), "0");
        assert_eq!(format_number(-3.0), "-3");
        assert_eq!(format_number(999_999_999_999_999.0), "999999999999999");
        assert_eq!(format_number(-999_999_999_999_999.0), "-999999999999999");
    }

    #[test]
    fn format_number_uses_the_shortest_round_trip_form_otherwise() {
        assert_eq!(format_number(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_number(-0.25), "-0.25");
        assert_eq!(format_number(1e15), "1e15");
        assert_eq!(format_number(1e20), "1e20");
        assert_eq!(format_number(-1.5e300), "-1.5e300");
        assert_eq!(format_number(1.5e-7), "1.5e-7");
        assert_eq!(format_number(0.000001), "0.000001");
        assert_eq!(format_number(consts::PI), "3.141592653589793");
        for sample in [0.1 + 0.2, 1e20, 1.5e-7, consts::E, 123.456, 1e15 + 0.5] {
            assert_eq!(format_number(sample).parse::<f64>(), Ok(sample));
        }
    }

    #[test]
    fn format_number_of_evaluated_results() {
        assert_eq!(format_number(value("2*(3+4)")), "14");
        assert_eq!(format_number(value("10/4")), "2.5");
        assert_eq!(format_number(value("-0*1")), "0");
    }
}
