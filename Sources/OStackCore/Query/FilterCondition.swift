/// A filter in the protocol's terms (docs/filters.md): both wire forms — the array AST that `--filter`
/// compiles to and the object FilterCondition `--filter-json` may also take — lower to this one tree,
/// which is checked against metadata and evaluated on the local mirror with the server's semantics.
public indirect enum FilterCondition: Sendable, Equatable {
    case all([FilterCondition])
    case any([FilterCondition])
    case not(FilterCondition)
    case compare(field: String, op: Operator, operand: Operand)
    case constant(Bool)

    public enum Operator: String, Sendable, Equatable {
        case eq, ne, gt, gte, lt, lte, `in`, nin, contains, icontains, notContains, startsWith, endsWith, like, ilike
        case between, null, exists
    }

    public enum Operand: Sendable, Equatable {
        case value(JSONValue)
        case field(String)
    }

    /// Every field the condition names.
    public var fields: [String] {
        switch self {
        case .all(let children), .any(let children): children.flatMap(\.fields)
        case .not(let child): child.fields
        case .compare(let field, _, .field(let other)): [field, other]
        case .compare(let field, _, _): [field]
        case .constant: []
        }
    }

    // MARK: Parsing the wire forms

    static let arrayOperators: [String: Operator] = [
        "=": .eq, "==": .eq, "eq": .eq, "equals": .eq,
        "!=": .ne, "<>": .ne, "ne": .ne, "neq": .ne, "not_equals": .ne, "notequals": .ne,
        ">": .gt, "gt": .gt, "greater_than": .gt, "greaterthan": .gt, "after": .gt,
        ">=": .gte, "gte": .gte, "greater_than_or_equal": .gte, "greaterthanorequal": .gte, "greaterorequal": .gte,
        "<": .lt, "lt": .lt, "less_than": .lt, "lessthan": .lt, "before": .lt,
        "<=": .lte, "lte": .lte, "less_than_or_equal": .lte, "lessthanorequal": .lte, "lessorequal": .lte,
        "in": .in, "nin": .nin, "not_in": .nin, "notin": .nin,
        "contains": .contains, "icontains": .icontains, "notcontains": .notContains, "not_contains": .notContains,
        "startswith": .startsWith, "starts_with": .startsWith, "endswith": .endsWith, "ends_with": .endsWith,
        "like": .like, "ilike": .ilike, "between": .between,
        "is_null": .null, "isnull": .null, "is_empty": .null, "isempty": .null,
        "is_not_null": .null, "isnotnull": .null, "is_not_empty": .null, "isnotempty": .null,
    ]

    static let objectOperators: [String: Operator] = [
        "$eq": .eq, "$ne": .ne, "$gt": .gt, "$gte": .gte, "$lt": .lt, "$lte": .lte, "$in": .in, "$nin": .nin,
        "$contains": .contains, "$icontains": .icontains, "$notContains": .notContains,
        "$startsWith": .startsWith, "$endsWith": .endsWith, "$like": .like, "$ilike": .ilike,
        "$between": .between, "$null": .null, "$exists": .exists,
    ]

    /// Parses either wire form; a malformed filter is `invalid-filter` with our own wording.
    public static func parse(_ json: JSONValue) throws(OStackError) -> FilterCondition {
        do {
            return try parse(json, depth: 0)
        } catch {
            throw OStackError(.invalidFilter, context: .init(suggestion: .text(error.message)), detail: "filter json")
        }
    }

    struct Malformed: Error {
        var message: String
    }

    static func parse(_ json: JSONValue, depth: Int) throws(Malformed) -> FilterCondition {
        guard depth < 64 else { throw Malformed(message: "The filter is nested too deeply") }
        switch json {
        case .array(let items): return try parseArray(items, depth: depth)
        case .object(let members): return try parseObject(members, depth: depth)
        default: throw Malformed(message: "A filter is a JSON array or object")
        }
    }

    static func parseArray(_ items: [JSONValue], depth: Int) throws(Malformed) -> FilterCondition {
        guard depth < 64 else { throw Malformed(message: "The filter is nested too deeply") }
        guard let first = items.first else { throw Malformed(message: "An empty filter matches nothing") }
        if case .string(let head) = first {
            let keyword = head.lowercased()
            if keyword == "and" || keyword == "or" {
                let children = try items.dropFirst().map { (item) throws(Malformed) -> FilterCondition in
                    guard case .array(let child) = item else { throw Malformed(message: "Group members are arrays") }
                    return try parseArray(child, depth: depth + 1)
                }
                guard !children.isEmpty else { throw Malformed(message: "A group needs at least one member") }
                return keyword == "and" ? .all(children) : .any(children)
            }
            guard items.count >= 2, case .string(let spelled) = items[1] else {
                throw Malformed(message: "A comparison is [field, operator, value]")
            }
            guard let op = arrayOperators[spelled.lowercased()] else {
                throw Malformed(message: "Unknown operator in a comparison")
            }
            if op == .null {
                return .compare(field: head, op: .null, operand: .value(.bool(!spelled.lowercased().contains("not"))))
            }
            guard items.count == 3 else { throw Malformed(message: "A comparison is [field, operator, value]") }
            return try comparison(field: head, op: op, raw: items[2])
        }
        let children = try items.map { (item) throws(Malformed) -> FilterCondition in
            guard case .array(let child) = item else { throw Malformed(message: "A list of comparisons holds arrays") }
            return try parseArray(child, depth: depth + 1)
        }
        return .all(children)
    }

    static func parseObject(_ members: [String: JSONValue], depth: Int) throws(Malformed) -> FilterCondition {
        var conditions: [FilterCondition] = []
        for key in members.keys.sorted() {
            let value = members[key]!
            switch key {
            case "$and", "$or":
                guard case .array(let items) = value else { throw Malformed(message: "$and and $or take arrays") }
                let children = try items.map { (item) throws(Malformed) -> FilterCondition in
                    try parse(item, depth: depth + 1)
                }
                if children.isEmpty {
                    conditions.append(.constant(key == "$and"))
                } else {
                    conditions.append(key == "$and" ? .all(children) : .any(children))
                }
            case "$not":
                conditions.append(.not(try parse(value, depth: depth + 1)))
            default:
                if key.hasPrefix("$") { throw Malformed(message: "Unknown operator in the filter") }
                if case .object(let ops) = value, ops.isEmpty {
                    throw Malformed(message: "A field condition needs an operator")
                }
                if case .object(let ops) = value, ops.keys.allSatisfy({ $0.hasPrefix("$") }) {
                    let retired = ["$regex", "$options"].filter { ops[$0] != nil }
                    if !retired.isEmpty {
                        throw Malformed(
                            message: "\(retired.joined(separator: " and ")) \(retired.count == 1 ? "is" : "are") not "
                                + "supported; for a case-insensitive substring use $icontains")
                    }
                    for opKey in ops.keys.sorted() {
                        guard let op = objectOperators[opKey] else {
                            throw Malformed(message: "Unknown operator in the filter")
                        }
                        let raw = ops[opKey]!
                        if op == .null || op == .exists {
                            guard case .bool = raw else {
                                throw Malformed(message: "$null and $exists take true or false")
                            }
                            conditions.append(.compare(field: key, op: op, operand: .value(raw)))
                        } else {
                            conditions.append(try comparison(field: key, op: op, raw: raw))
                        }
                    }
                } else {
                    conditions.append(try comparison(field: key, op: .eq, raw: value))
                }
            }
        }
        return conditions.count == 1 ? conditions[0] : .all(conditions)
    }

    static func comparison(field: String, op: Operator, raw: JSONValue) throws(Malformed) -> FilterCondition {
        switch op {
        case .in, .nin:
            guard case .array(let values) = raw, values.allSatisfy(isScalar) else {
                throw Malformed(message: "in and not in take a list of values")
            }
            return .compare(field: field, op: op, operand: .value(raw))
        case .between:
            guard case .array(let values) = raw, values.count == 2, values.allSatisfy(isScalar) else {
                throw Malformed(message: "between takes exactly two values")
            }
            return .compare(field: field, op: op, operand: .value(raw))
        case .contains, .icontains, .notContains, .startsWith, .endsWith, .like, .ilike:
            guard case .string(let text) = raw else {
                throw Malformed(message: "$\(op.rawValue) takes a string")
            }
            if op == .icontains && text.isEmpty {
                throw Malformed(message: "An empty $icontains matches every row; give it some text")
            }
            if (op == .like || op == .ilike) && endsWithLoneBackslash(text) {
                throw Malformed(message: "A $\(op.rawValue) pattern ends with a lone backslash; write \\\\ for one")
            }
            return .compare(field: field, op: op, operand: .value(raw))
        default:
            if case .object(let members) = raw, members.count == 1, let other = members["$field"]?.stringValue {
                return .compare(field: field, op: op, operand: .field(other))
            }
            guard isScalar(raw) else { throw Malformed(message: "Comparisons take a string, number, boolean or null") }
            return .compare(field: field, op: op, operand: .value(raw))
        }
    }

    /// Whether a LIKE pattern ends in an unpaired escape (`\\` escapes the next character).
    static func endsWithLoneBackslash(_ pattern: String) -> Bool {
        var escaped = false
        for scalar in pattern.unicodeScalars {
            escaped = !escaped && scalar == "\\"
        }
        return escaped
    }

    static func isScalar(_ value: JSONValue) -> Bool {
        switch value {
        case .null, .bool, .number, .string: true
        case .array, .object: false
        }
    }
}
