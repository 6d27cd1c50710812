/// A parsed filter (docs/filters.md): both the array AST and the object FilterCondition lower to this.
indirect enum Condition: Sendable {
    case all([Condition])
    case any([Condition])
    case not(Condition)
    case compare(field: String, op: Operator, operand: Operand)
    /// A comparison of a `datetime` field with instants (milliseconds since the epoch), made by
    /// `typed(for:)`; `upperExclusive` makes `between`'s maximum half-open.
    case instant(field: String, op: Operator, bounds: [Int64], upperExclusive: Bool)
    case constant(Bool)

    enum Operator: String, Sendable {
        case eq, ne, gt, gte, lt, lte, `in`, nin, contains, icontains, notContains, startsWith, endsWith, like, ilike
        case between, null, exists
    }

    enum Operand: Sendable {
        case value(JSONValue)
        case field(String)
    }

    /// Every field the condition mentions (for INVALID_FIELD checks).
    var fields: [String] {
        switch self {
        case .all(let children), .any(let children): return children.flatMap(\.fields)
        case .not(let child): return child.fields
        case .compare(let field, _, let operand):
            if case .field(let other) = operand { return [field, other] }
            return [field]
        case .instant(let field, _, _, _): return [field]
        case .constant: return []
        }
    }

    /// The condition with comparisons on `datetime` fields made typed, as ObjectStack's SQL driver
    /// types them (its temporal conformance table): both sides compare as instants, a bare day
    /// (`YYYY-MM-DD`) is that day's UTC midnight, except as an inclusive upper bound (`$lte`,
    /// `$between`'s maximum), where it means the whole day, half-open at the next midnight.
    /// `date` and `time` fields compare as text and are left alone.
    func typed(for object: ObjectDefinition) -> Condition {
        switch self {
        case .all(let children): return .all(children.map { $0.typed(for: object) })
        case .any(let children): return .any(children.map { $0.typed(for: object) })
        case .not(let child): return .not(child.typed(for: object))
        case .instant, .constant: return self
        case .compare(let field, let op, let operand):
            let type = object.field(field)?.type ?? (["created_at", "updated_at"].contains(field) ? "datetime" : nil)
            guard type == "datetime", case .value(let value) = operand else { return self }
            var texts: [String] = []
            switch value {
            case .string(let text): texts = [text]
            case .array(let items):
                texts = items.compactMap(\.stringValue)
                guard texts.count == items.count, !texts.isEmpty else { return self }
            default: return self
            }
            let parsed = texts.compactMap(Instant.milliseconds)
            guard parsed.count == texts.count else { return self }
            switch op {
            case .lte where Instant.isBareDay(texts[0]):
                return .instant(field: field, op: .lt, bounds: [parsed[0] + Instant.day], upperExclusive: false)
            case .between:
                guard parsed.count == 2 else { return self }
                let widen = Instant.isBareDay(texts[1])
                return .instant(
                    field: field, op: .between, bounds: [parsed[0], parsed[1] + (widen ? Instant.day : 0)],
                    upperExclusive: widen)
            case .eq, .ne, .gt, .gte, .lt, .lte, .in, .nin:
                return .instant(field: field, op: op, bounds: parsed, upperExclusive: false)
            default: return self
            }
        }
    }
}

/// Why a filter was refused (→ 400 INVALID_FILTER).
struct FilterError: Error {
    var message: String
}

enum FilterParser {
    static let arrayOperators: [String: Condition.Operator] = [
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

    static let objectOperators: [String: Condition.Operator] = [
        "$eq": .eq, "$ne": .ne, "$gt": .gt, "$gte": .gte, "$lt": .lt, "$lte": .lte, "$in": .in, "$nin": .nin,
        "$contains": .contains, "$icontains": .icontains, "$notContains": .notContains,
        "$startsWith": .startsWith, "$endsWith": .endsWith, "$like": .like, "$ilike": .ilike,
        "$between": .between, "$null": .null, "$exists": .exists,
    ]

    static func parse(_ json: JSONValue) throws(FilterError) -> Condition {
        switch json {
        case .array(let items): return try parseArray(items)
        case .object(let members): return try parseObject(members)
        default: throw FilterError(message: "filter must be an array or an object")
        }
    }

    // MARK: Array AST

    static func parseArray(_ items: [JSONValue]) throws(FilterError) -> Condition {
        guard let first = items.first else { throw FilterError(message: "empty filter") }
        if case .string(let head) = first {
            let keyword = head.lowercased()
            if keyword == "and" || keyword == "or" {
                let children = try items.dropFirst().map { (item) throws(FilterError) -> Condition in
                    guard case .array(let child) = item else {
                        throw FilterError(message: "group members must be arrays")
                    }
                    return try parseArray(child)
                }
                guard !children.isEmpty else { throw FilterError(message: "a group needs a member") }
                return keyword == "and" ? .all(children) : .any(children)
            }
            guard items.count >= 2, case .string(let opText) = items[1] else {
                throw FilterError(message: "a comparison is [field, operator, value]")
            }
            let spelled = opText.lowercased()
            guard let op = arrayOperators[spelled] else { throw FilterError(message: "unknown operator") }
            if op == .null {
                let negated = spelled.contains("not")
                return .compare(field: head, op: .null, operand: .value(.bool(!negated)))
            }
            guard items.count == 3 else { throw FilterError(message: "a comparison is [field, operator, value]") }
            return try comparison(field: head, op: op, raw: items[2])
        }
        // Legacy list of comparisons: implicit AND.
        let children = try items.map { (item) throws(FilterError) -> Condition in
            guard case .array(let child) = item else { throw FilterError(message: "malformed filter") }
            return try parseArray(child)
        }
        return .all(children)
    }

    // MARK: Object form

    static func parseObject(_ members: [(String, JSONValue)]) throws(FilterError) -> Condition {
        var conditions: [Condition] = []
        for (key, value) in members {
            switch key {
            case "$and", "$or":
                guard case .array(let items) = value else { throw FilterError(message: "\(key) needs an array") }
                let children = try items.map { (item) throws(FilterError) -> Condition in try parse(item) }
                conditions.append(key == "$and" ? .all(children) : .any(children))
            case "$not":
                conditions.append(.not(try parse(value)))
            default:
                if key.hasPrefix("$") { throw FilterError(message: "unknown operator") }
                if case .object(let ops) = value, !ops.isEmpty, ops.allSatisfy({ $0.0.hasPrefix("$") }) {
                    let retired = ["$regex", "$options"].filter { key in ops.contains { $0.0 == key } }
                    if !retired.isEmpty {
                        throw FilterError(
                            message: "\(retired.joined(separator: " and ")) \(retired.count == 1 ? "is" : "are") "
                                + "retired; use $icontains for a case-insensitive substring match")
                    }
                    for (opKey, raw) in ops {
                        guard let op = objectOperators[opKey] else { throw FilterError(message: "unknown operator") }
                        if op == .null || op == .exists {
                            guard case .bool = raw else { throw FilterError(message: "\(opKey) needs a boolean") }
                            conditions.append(.compare(field: key, op: op, operand: .value(raw)))
                        } else {
                            conditions.append(try comparison(field: key, op: op, raw: raw))
                        }
                    }
                } else if case .object(let ops) = value, ops.isEmpty {
                    throw FilterError(message: "empty condition for \(key)")
                } else {
                    conditions.append(try comparison(field: key, op: .eq, raw: value))
                }
            }
        }
        return conditions.count == 1 ? conditions[0] : .all(conditions)
    }

    static func comparison(field: String, op: Condition.Operator, raw: JSONValue) throws(FilterError) -> Condition {
        switch op {
        case .in, .nin:
            guard case .array(let values) = raw else { throw FilterError(message: "in needs an array") }
            guard values.allSatisfy(isScalar) else { throw FilterError(message: "in takes scalars") }
            return .compare(field: field, op: op, operand: .value(raw))
        case .between:
            guard case .array(let values) = raw, values.count == 2, values.allSatisfy(isScalar) else {
                throw FilterError(message: "between needs [min, max]")
            }
            return .compare(field: field, op: op, operand: .value(raw))
        case .contains, .icontains, .notContains, .startsWith, .endsWith, .like, .ilike:
            guard case .string(let text) = raw else { throw FilterError(message: "$\(op.rawValue) needs a string") }
            if op == .icontains && text.isEmpty {
                throw FilterError(message: "an empty $icontains comparand constrains nothing")
            }
            if op == .like || op == .ilike {
                var escaped = false
                for scalar in text.unicodeScalars { escaped = !escaped && scalar == "\\" }
                if escaped { throw FilterError(message: "$\(op.rawValue) pattern ends with a lone backslash") }
            }
            return .compare(field: field, op: op, operand: .value(raw))
        default:
            if case .object(let members) = raw, members.count == 1, members[0].0 == "$field",
                case .string(let other) = members[0].1
            {
                return .compare(field: field, op: op, operand: .field(other))
            }
            guard isScalar(raw) else { throw FilterError(message: "unsupported comparand") }
            return .compare(field: field, op: op, operand: .value(raw))
        }
    }

    static func isScalar(_ value: JSONValue) -> Bool {
        switch value {
        case .null, .bool, .number, .string: return true
        default: return false
        }
    }
}

/// Evaluates a condition on a record as ObjectStack does (its filter-logic and cross-field
/// conformance tables): two-valued. A NULL or missing field fails every positive comparison and
/// satisfies the negative ones (`$ne` of a value, `$nin`, `$notContains`); `$eq: null` / `$ne: null`
/// are null tests; `$not` is the exact complement; two NULL fields compared with `$field` are equal.
enum FilterEvaluator {
    static func matches(_ condition: Condition, _ record: Record) -> Bool {
        evaluate(condition, record)
    }

    static func evaluate(_ condition: Condition, _ record: Record) -> Bool {
        switch condition {
        case .constant(let value): return value
        case .all(let children): return children.allSatisfy { evaluate($0, record) }
        case .any(let children): return children.contains { evaluate($0, record) }
        case .not(let child): return !evaluate(child, record)
        case .instant(let field, let op, let bounds, let upperExclusive):
            let value = record[field] ?? .null
            if value.isNull { return nullSatisfies(op, operandIsNull: false) }
            guard case .string(let text) = value, let shown = Instant.milliseconds(text) else {
                return op == .ne || op == .nin
            }
            // In microseconds: `updated_at` may hold more than the wire shows (`Record.micros`), and
            // a comparand in milliseconds is that millisecond's first microsecond, as on Postgres.
            let micros = shown * 1000 + (field == "updated_at" ? Int64(record.micros) : 0)
            let bounds = bounds.map { $0 * 1000 }
            switch op {
            case .eq: return micros == bounds[0]
            case .ne: return micros != bounds[0]
            case .gt: return micros > bounds[0]
            case .gte: return micros >= bounds[0]
            case .lt: return micros < bounds[0]
            case .lte: return micros <= bounds[0]
            case .in: return bounds.contains(micros)
            case .nin: return !bounds.contains(micros)
            case .between: return micros >= bounds[0] && (upperExclusive ? micros < bounds[1] : micros <= bounds[1])
            default: return false
            }
        case .compare(let field, let op, let operand):
            let value = record[field] ?? .null
            switch op {
            case .null:
                let wantNull = operand.valueOrNull == .bool(true)
                return value.isNull == wantNull
            case .exists:
                let wantExists = operand.valueOrNull == .bool(true)
                return (record[field] != nil) == wantExists
            default: break
            }
            let right: JSONValue
            switch operand {
            case .value(let literal): right = literal
            case .field(let other):
                right = record[other] ?? .null
                switch (value.isNull, right.isNull) {
                case (true, true): return op == .eq
                case (true, false), (false, true): return op == .ne
                case (false, false): break
                }
            }
            if value.isNull { return nullSatisfies(op, operandIsNull: right.isNull) }
            switch op {
            case .eq: return !right.isNull && compare(value, right) == 0
            case .ne: return right.isNull || compare(value, right) != 0
            case .gt: return compare(value, right).map { $0 > 0 } ?? false
            case .gte: return compare(value, right).map { $0 >= 0 } ?? false
            case .lt: return compare(value, right).map { $0 < 0 } ?? false
            case .lte: return compare(value, right).map { $0 <= 0 } ?? false
            case .in: return right.arrayValue?.contains { compare(value, $0) == 0 } ?? false
            case .nin: return !(right.arrayValue?.contains { compare(value, $0) == 0 } ?? false)
            case .between:
                guard let bounds = right.arrayValue, bounds.count == 2,
                    let low = compare(value, bounds[0]), let high = compare(value, bounds[1])
                else { return false }
                return low >= 0 && high <= 0
            case .contains, .icontains, .notContains, .startsWith, .endsWith, .like, .ilike:
                guard case .string(let text) = value, case .string(let needle) = right else {
                    return op == .notContains
                }
                switch op {
                case .contains: return scalarsContain(text, needle)
                case .icontains: return scalarsContain(asciiLower(text), asciiLower(needle))
                case .notContains: return !scalarsContain(text, needle)
                case .startsWith: return text.unicodeScalars.starts(with: needle.unicodeScalars)
                case .endsWith: return text.unicodeScalars.reversed().starts(with: needle.unicodeScalars.reversed())
                case .like:
                    return like(Array(text.unicodeScalars), Array(needle.unicodeScalars), caseInsensitive: false)
                default: return like(Array(text.unicodeScalars), Array(needle.unicodeScalars), caseInsensitive: true)
                }
            case .null, .exists: return false
            }
        }
    }

    /// Whether a NULL or missing field satisfies `op` (the real server's answer per operator).
    static func nullSatisfies(_ op: Condition.Operator, operandIsNull: Bool) -> Bool {
        switch op {
        case .eq: return operandIsNull
        case .ne: return !operandIsNull
        case .nin, .notContains: return true
        default: return false
        }
    }

    /// Orders two scalars of the same kind (numbers numerically, strings by code point — ISO dates
    /// compare correctly — booleans false < true); nil when they are not comparable.
    static func compare(_ left: JSONValue, _ right: JSONValue) -> Int? {
        switch (left, right) {
        case (.number(let a), .number(let b)): return a < b ? -1 : (a > b ? 1 : 0)
        case (.string(let a), .string(let b)): return codePointOrder(a, b)
        case (.bool(let a), .bool(let b)): return a == b ? 0 : (a ? 1 : -1)
        case (.string(let a), .number(let b)): return numeric(a).map { $0 < b ? -1 : ($0 > b ? 1 : 0) }
        case (.number(let a), .string(let b)): return numeric(b).map { a < $0 ? -1 : (a > $0 ? 1 : 0) }
        default: return nil
        }
    }

    /// A numeric string as a number, like SQL's cast: finite decimals only ("nan", "inf", hex are text).
    static func numeric(_ text: String) -> Double? {
        guard !text.isEmpty,
            text.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 43 || $0 == 46 || $0 == 101 || $0 == 69 }
            ),
            let value = Double(text), value.isFinite
        else { return nil }
        return value
    }

    /// Code-point order (SQL's binary collation), not Swift's canonical equivalence.
    static func codePointOrder(_ a: String, _ b: String) -> Int {
        var left = a.unicodeScalars.makeIterator()
        var right = b.unicodeScalars.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case (let x?, let y?) where x != y: return x.value < y.value ? -1 : 1
            default: continue
            }
        }
    }

    static func scalarsContain(_ text: String, _ needle: String) -> Bool {
        let haystack = Array(text.unicodeScalars)
        let pattern = Array(needle.unicodeScalars)
        guard !pattern.isEmpty else { return true }
        guard pattern.count <= haystack.count else { return false }
        for start in 0...(haystack.count - pattern.count) where haystack[start] == pattern[0] {
            if Array(haystack[start..<start + pattern.count]) == pattern { return true }
        }
        return false
    }

    static func asciiLower(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map {
                    ($0.value >= 65 && $0.value <= 90) ? Unicode.Scalar($0.value + 32)! : $0
                }))
    }

    /// A LIKE pattern (`$like`/`$ilike`): `%` any run, `_` one character, a backslash escapes the
    /// next character; `$ilike` folds ASCII letters only.
    static func like(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar], caseInsensitive: Bool) -> Bool {
        enum Token: Equatable {
            case anyRun, one
            case literal(Unicode.Scalar)
        }
        func fold(_ s: Unicode.Scalar) -> Unicode.Scalar {
            caseInsensitive && s.value >= 65 && s.value <= 90 ? Unicode.Scalar(s.value + 32)! : s
        }
        var tokens: [Token] = []
        var index = 0
        while index < pattern.count {
            switch pattern[index] {
            case "%": tokens.append(.anyRun)
            case "_": tokens.append(.one)
            case "\\":
                index += 1
                if index >= pattern.count { return false }
                tokens.append(.literal(fold(pattern[index])))
            default: tokens.append(.literal(fold(pattern[index])))
            }
            index += 1
        }
        var t = 0, p = 0, star = -1, mark = 0
        while t < text.count {
            if p < tokens.count && (tokens[p] == .one || tokens[p] == .literal(fold(text[t]))) {
                t += 1; p += 1
            } else if p < tokens.count && tokens[p] == .anyRun {
                star = p; mark = t; p += 1
            } else if star >= 0 {
                p = star + 1; mark += 1; t = mark
            } else {
                return false
            }
        }
        while p < tokens.count && tokens[p] == .anyRun { p += 1 }
        return p == tokens.count
    }
}

extension Condition.Operand {
    var valueOrNull: JSONValue {
        if case .value(let value) = self { return value }
        return .null
    }
}
