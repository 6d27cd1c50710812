/// Parses the `--filter` language (docs/filters.md):
///
///     status = 'open' and (amount >= 1000 or owner in ('u1', 'u2'))
///
/// Operators as words or symbols (`eq =`, `neq !=`, `gt >`, `gte >=`, `lt <`, `lte <=`, `contains`,
/// `icontains` (ASCII case-insensitive), `not contains`, `starts with`, `ends with`, `in (…)`, `not in (…)`, `is null`, `is not null`,
/// `between … and …`), `and` binding tighter than `or`, parentheses, strings in single or double quotes
/// (a doubled quote escapes it), numbers, `true`/`false`, ISO dates as strings. Errors name the column
/// (1-based). The parser never traps: every input ends in an expression or a `FilterSyntaxError`.
public struct FilterParser {
    public struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        public var column: Int
        public var message: String
        public var description: String { "column \(column): \(message)" }
    }

    enum Token: Equatable {
        case word(String)  // identifiers and keywords
        case string(String)
        case number(Double)
        case symbol(String)
        case end
    }

    let tokens: [(token: Token, column: Int)]
    var position = 0
    static let maximumDepth = 64

    /// Parses `text`, or throws `invalid-filter` with the column in the hint.
    public static func parse(_ text: String) throws(OStackError) -> FilterExpression {
        do {
            return try parseOrThrowSyntax(text)
        } catch {
            throw OStackError(
                .invalidFilter, context: .init(suggestion: "At column \(error.column): \(error.message)."),
                detail: "filter syntax")
        }
    }

    public static func parseOrThrowSyntax(_ text: String) throws(SyntaxError) -> FilterExpression {
        var parser = FilterParser(tokens: try tokenize(text))
        let expression = try parser.parseOr(depth: 0)
        guard case .end = parser.current.token else {
            throw SyntaxError(column: parser.current.column, message: "unexpected \(parser.describeCurrent())")
        }
        return expression
    }

    // MARK: Tokens

    static func tokenize(_ text: String) throws(SyntaxError) -> [(token: Token, column: Int)] {
        let scalars = Array(text.unicodeScalars)
        var tokens: [(token: Token, column: Int)] = []
        var index = 0
        func isWordStart(_ s: Unicode.Scalar) -> Bool { s.properties.isAlphabetic || s == "_" }
        func isWord(_ s: Unicode.Scalar) -> Bool {
            s.properties.isAlphabetic || s == "_" || s == "." || ("0"..."9").contains(s)
        }
        while index < scalars.count {
            let scalar = scalars[index]
            let column = index + 1
            if scalar.properties.isWhitespace {
                index += 1
            } else if scalar == "'" || scalar == "\"" {
                var value = String.UnicodeScalarView()
                index += 1
                var closed = false
                while index < scalars.count {
                    if scalars[index] == scalar {
                        if index + 1 < scalars.count && scalars[index + 1] == scalar {
                            value.append(scalar)
                            index += 2
                            continue
                        }
                        index += 1
                        closed = true
                        break
                    }
                    value.append(scalars[index])
                    index += 1
                }
                guard closed else { throw SyntaxError(column: column, message: "unterminated string") }
                tokens.append((.string(String(value)), column))
            } else if ("0"..."9").contains(scalar)
                || (scalar == "-" && index + 1 < scalars.count && ("0"..."9").contains(scalars[index + 1]))
            {
                var end = index + 1
                while end < scalars.count,
                    ("0"..."9").contains(scalars[end]) || scalars[end] == "." || scalars[end] == "e"
                        || scalars[end] == "E"
                        || ((scalars[end] == "-" || scalars[end] == "+")
                            && (scalars[end - 1] == "e" || scalars[end - 1] == "E"))
                {
                    end += 1
                }
                let literal = String(String.UnicodeScalarView(scalars[index..<end]))
                // An ISO date or time (2026-01-31, 2026-01-31T10:00:00Z) reads as a string.
                var dateEnd = end
                while dateEnd < scalars.count,
                    ("0"..."9").contains(scalars[dateEnd]) || ":-TZ.+".unicodeScalars.contains(scalars[dateEnd])
                {
                    dateEnd += 1
                }
                let candidate = String(String.UnicodeScalarView(scalars[index..<dateEnd]))
                if candidate.count >= 10, candidate.split(separator: "-").count >= 3, !literal.hasPrefix("-") {
                    tokens.append((.string(candidate), column))
                    index = dateEnd
                    continue
                }
                guard let number = Double(literal), number.isFinite else {
                    throw SyntaxError(column: column, message: "'\(literal)' is not a number")
                }
                tokens.append((.number(number), column))
                index = end
            } else if isWordStart(scalar) {
                var end = index + 1
                while end < scalars.count, isWord(scalars[end]) { end += 1 }
                tokens.append((.word(String(String.UnicodeScalarView(scalars[index..<end]))), column))
                index = end
            } else {
                let two = index + 1 < scalars.count ? String(scalar) + String(scalars[index + 1]) : ""
                if [">=", "<=", "!=", "<>", "=="].contains(two) {
                    tokens.append((.symbol(two == "<>" ? "!=" : (two == "==" ? "=" : two)), column))
                    index += 2
                } else if "=<>(),".unicodeScalars.contains(scalar) {
                    tokens.append((.symbol(String(scalar)), column))
                    index += 1
                } else {
                    throw SyntaxError(column: column, message: "unexpected character '\(Character(scalar))'")
                }
            }
        }
        tokens.append((.end, scalars.count + 1))
        return tokens
    }

    // MARK: Grammar

    var current: (token: Token, column: Int) { tokens[min(position, tokens.count - 1)] }

    func describeCurrent() -> String {
        switch current.token {
        case .word(let word): "'\(word)'"
        case .string: "a string"
        case .number: "a number"
        case .symbol(let symbol): "'\(symbol)'"
        case .end: "end of filter"
        }
    }

    func isKeyword(_ keyword: String, at offset: Int = 0) -> Bool {
        guard position + offset < tokens.count, case .word(let word) = tokens[position + offset].token else {
            return false
        }
        return word.lowercased() == keyword
    }

    mutating func expectKeyword(_ keyword: String) throws(SyntaxError) {
        guard isKeyword(keyword) else {
            throw SyntaxError(column: current.column, message: "expected '\(keyword)', found \(describeCurrent())")
        }
        position += 1
    }

    mutating func expectSymbol(_ symbol: String) throws(SyntaxError) {
        guard case .symbol(symbol) = current.token else {
            throw SyntaxError(column: current.column, message: "expected '\(symbol)', found \(describeCurrent())")
        }
        position += 1
    }

    mutating func parseOr(depth: Int) throws(SyntaxError) -> FilterExpression {
        guard depth < Self.maximumDepth else { throw SyntaxError(column: current.column, message: "too deeply nested") }
        var children = [try parseAnd(depth: depth)]
        while isKeyword("or") {
            position += 1
            children.append(try parseAnd(depth: depth))
        }
        return children.count == 1 ? children[0] : .any(children)
    }

    mutating func parseAnd(depth: Int) throws(SyntaxError) -> FilterExpression {
        var children = [try parsePrimary(depth: depth)]
        while isKeyword("and") {
            position += 1
            children.append(try parsePrimary(depth: depth))
        }
        return children.count == 1 ? children[0] : .all(children)
    }

    mutating func parsePrimary(depth: Int) throws(SyntaxError) -> FilterExpression {
        if case .symbol("(") = current.token {
            position += 1
            let inner = try parseOr(depth: depth + 1)
            try expectSymbol(")")
            return inner
        }
        return try parseComparison()
    }

    static let reserved: Set<String> = [
        "and", "or", "not", "in", "is", "null", "between", "contains", "icontains", "starts", "ends", "with", "true",
        "false",
    ]

    mutating func parseComparison() throws(SyntaxError) -> FilterExpression {
        guard case .word(let field) = current.token, !Self.reserved.contains(field.lowercased()) else {
            throw SyntaxError(column: current.column, message: "expected a field name, found \(describeCurrent())")
        }
        position += 1
        let opColumn = current.column
        switch current.token {
        case .symbol(let symbol) where ["=", "!=", ">", ">=", "<", "<="].contains(symbol):
            position += 1
            return .compare(field: field, op: FilterExpression.Comparison(rawValue: symbol)!, value: try parseLiteral())
        case .word(let word):
            let lowered = word.lowercased()
            let named: [String: FilterExpression.Comparison] = [
                "eq": .eq, "neq": .neq, "gt": .gt, "gte": .gte, "lt": .lt, "lte": .lte,
            ]
            if let op = named[lowered] {
                position += 1
                return .compare(field: field, op: op, value: try parseLiteral())
            }
            switch lowered {
            case "contains", "icontains":
                position += 1
                return .compare(
                    field: field, op: lowered == "contains" ? .contains : .icontains, value: try parseString())
            case "starts", "ends":
                position += 1
                try expectKeyword("with")
                return .compare(
                    field: field, op: lowered == "starts" ? .startsWith : .endsWith, value: try parseString())
            case "in":
                position += 1
                return .membership(field: field, values: try parseList(), negated: false)
            case "not":
                position += 1
                if isKeyword("in") {
                    position += 1
                    return .membership(field: field, values: try parseList(), negated: true)
                }
                if isKeyword("contains") {
                    position += 1
                    return .compare(field: field, op: .notContains, value: try parseString())
                }
                throw SyntaxError(column: current.column, message: "expected 'in' or 'contains' after 'not'")
            case "is":
                position += 1
                var isNull = true
                if isKeyword("not") {
                    position += 1
                    isNull = false
                }
                try expectKeyword("null")
                return .null(field: field, isNull: isNull)
            case "between":
                position += 1
                let low = try parseLiteral()
                try expectKeyword("and")
                return .between(field: field, low: low, high: try parseLiteral())
            default: break
            }
        default: break
        }
        throw SyntaxError(
            column: opColumn, message: "expected an operator after '\(field)', found \(describeCurrent())")
    }

    mutating func parseLiteral() throws(SyntaxError) -> FilterLiteral {
        switch current.token {
        case .string(let value):
            position += 1
            return .string(value)
        case .number(let value):
            position += 1
            return .number(value)
        case .word(let word) where word.lowercased() == "true" || word.lowercased() == "false":
            position += 1
            return .bool(word.lowercased() == "true")
        default:
            throw SyntaxError(column: current.column, message: "expected a value, found \(describeCurrent())")
        }
    }

    mutating func parseString() throws(SyntaxError) -> FilterLiteral {
        guard case .string(let value) = current.token else {
            throw SyntaxError(column: current.column, message: "expected a quoted string, found \(describeCurrent())")
        }
        position += 1
        return .string(value)
    }

    mutating func parseList() throws(SyntaxError) -> [FilterLiteral] {
        try expectSymbol("(")
        var values = [try parseLiteral()]
        while case .symbol(",") = current.token {
            position += 1
            values.append(try parseLiteral())
        }
        try expectSymbol(")")
        return values
    }
}
