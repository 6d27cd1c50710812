/// A parsed `--filter` expression (docs/filters.md), before it is compiled to the protocol's filter AST.
public indirect enum FilterExpression: Sendable, Equatable {
    case all([FilterExpression])
    case any([FilterExpression])
    case compare(field: String, op: Comparison, value: FilterLiteral)
    case membership(field: String, values: [FilterLiteral], negated: Bool)
    case null(field: String, isNull: Bool)
    case between(field: String, low: FilterLiteral, high: FilterLiteral)

    public enum Comparison: String, Sendable, CaseIterable {
        case eq = "="
        case neq = "!="
        case gt = ">"
        case gte = ">="
        case lt = "<"
        case lte = "<="
        case contains = "contains"
        case icontains = "icontains"
        case notContains = "not contains"
        case startsWith = "starts with"
        case endsWith = "ends with"

        /// The operator spelling of the protocol's array AST (docs/filters.md).
        var wire: String {
            switch self {
            case .eq: "="
            case .neq: "!="
            case .gt: ">"
            case .gte: ">="
            case .lt: "<"
            case .lte: "<="
            case .contains: "contains"
            case .icontains: "icontains"
            case .notContains: "notcontains"
            case .startsWith: "startswith"
            case .endsWith: "endswith"
            }
        }
    }

    /// Every field the expression mentions.
    public var fields: [String] {
        switch self {
        case .all(let children), .any(let children): children.flatMap(\.fields)
        case .compare(let field, _, _), .membership(let field, _, _), .null(let field, _), .between(let field, _, _):
            [field]
        }
    }

    /// The protocol's array AST (docs/filters.md, the array form).
    public var wireAST: JSONValue {
        switch self {
        case .all(let children): .array([.string("and")] + children.map(\.wireAST))
        case .any(let children): .array([.string("or")] + children.map(\.wireAST))
        case .compare(let field, let op, let value): .array([.string(field), .string(op.wire), value.json])
        case .membership(let field, let values, let negated):
            .array([.string(field), .string(negated ? "nin" : "in"), .array(values.map(\.json))])
        case .null(let field, let isNull): .array([.string(field), .string(isNull ? "is_null" : "is_not_null")])
        case .between(let field, let low, let high):
            .array([.string(field), .string("between"), .array([low.json, high.json])])
        }
    }

    /// Canonical text: parsing it gives back an equal expression.
    public var text: String { render(top: true) }

    func render(top: Bool) -> String {
        switch self {
        case .all(let children):
            let inner = children.map { $0.render(top: false) }.joined(separator: " and ")
            return top ? inner : "(\(inner))"
        case .any(let children):
            let inner = children.map { $0.render(top: false) }.joined(separator: " or ")
            return top ? inner : "(\(inner))"
        case .compare(let field, let op, let value): return "\(field) \(op.rawValue) \(value.text)"
        case .membership(let field, let values, let negated):
            return "\(field) \(negated ? "not in" : "in") (\(values.map(\.text).joined(separator: ", ")))"
        case .null(let field, let isNull): return "\(field) is \(isNull ? "" : "not ")null"
        case .between(let field, let low, let high): return "\(field) between \(low.text) and \(high.text)"
        }
    }
}

/// A literal in a filter: string (ISO dates are strings), number or boolean.
public enum FilterLiteral: Sendable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)

    var json: JSONValue {
        switch self {
        case .string(let value): .string(value)
        case .number(let value): .number(value)
        case .bool(let value): .bool(value)
        }
    }

    var text: String {
        switch self {
        case .string(let value): "'" + value.replacing("'", with: "''") + "'"
        case .number(let value):
            value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        case .bool(let value): value ? "true" : "false"
        }
    }
}
