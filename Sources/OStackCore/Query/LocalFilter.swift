/// A `FilterCondition` compiled for the local mirror: fields resolved to scanner slots, evaluated
/// with ObjectStack's semantics as its own conformance tables state them (docs/filters.md):
///
/// - two-valued logic: a NULL or missing field fails every positive comparison, and satisfies the
///   negative ones (`!=`, `not in`, `not contains`); `= null` / `!= null` are null tests; `$not` is
///   the exact complement of its operand;
/// - a field compared with another field (`{"$field": …}`): two NULLs are equal, one NULL is unequal
///   and unordered;
/// - numbers compare numerically, strings by code point, booleans false < true; a numeric string
///   compares with a number as a number; other mixes are unequal and unordered;
/// - `datetime` fields (given through `fieldTypes`) compare as instants, and a bare-day bound on them
///   is typed (`CalendarInstant`); `date` and `time` fields compare as text;
/// - text operators take their comparand literally and are case-sensitive, except `icontains`
///   (and `ilike`), which fold ASCII letters only; `like`/`ilike` patterns use `%`, `_` and `\`.
public struct LocalFilter: Sendable {
    public let scanner: FieldScanner
    let root: Node

    indirect enum Node: Sendable {
        case all([Node])
        case any([Node])
        case not(Node)
        case compare(slot: Int, op: FilterCondition.Operator, operand: Operand)
        /// A comparison of a `datetime` field with instants (milliseconds); `upperExclusive` makes the
        /// upper bound of `between` (and of a widened `<=`) half-open.
        case instant(slot: Int, op: FilterCondition.Operator, bounds: [Int64], upperExclusive: Bool)
        case constant(Bool)
    }

    enum Operand: Sendable {
        case value(ScalarValue)
        case list([ScalarValue])
        case field(Int)
    }

    /// `fieldTypes` maps field names to metadata types (`datetime`, `date`, …); fields it does not
    /// name compare untyped.
    public init(_ condition: FilterCondition, fieldTypes: [String: String] = [:]) {
        var fields: [String] = []
        func slot(_ name: String) -> Int {
            if let index = fields.firstIndex(of: name) { return index }
            fields.append(name)
            return fields.count - 1
        }
        func compile(_ condition: FilterCondition) -> Node {
            switch condition {
            case .all(let children): return .all(children.map(compile))
            case .any(let children): return .any(children.map(compile))
            case .not(let child): return .not(compile(child))
            case .constant(let value): return .constant(value)
            case .compare(let field, let op, let operand):
                let index = slot(field)
                if fieldTypes[field] == "datetime", case .value(let value) = operand,
                    let typed = Self.instantNode(slot: index, op: op, value: value)
                {
                    return typed
                }
                switch operand {
                case .field(let other): return .compare(slot: index, op: op, operand: .field(slot(other)))
                case .value(.array(let items)):
                    return .compare(slot: index, op: op, operand: .list(items.map { ScalarValue($0) }))
                case .value(let value): return .compare(slot: index, op: op, operand: .value(ScalarValue(value)))
                }
            }
        }
        root = compile(condition)
        scanner = FieldScanner(fields: fields)
    }

    /// The typed form of a comparison on a `datetime` field, when every comparand is a date or a
    /// date-time string (else nil: the comparison stays untyped).
    static func instantNode(slot: Int, op: FilterCondition.Operator, value: JSONValue) -> Node? {
        let texts: [String]
        switch value {
        case .string(let text): texts = [text]
        case .array(let items):
            let strings = items.compactMap(\.stringValue)
            guard strings.count == items.count, !strings.isEmpty else { return nil }
            texts = strings
        default: return nil
        }
        var bounds: [Int64] = []
        for text in texts {
            guard let millis = CalendarInstant.milliseconds(text) else { return nil }
            bounds.append(millis)
        }
        switch op {
        case .lte where CalendarInstant.isBareDay(texts[0]):
            return .instant(
                slot: slot, op: .lt, bounds: [bounds[0] + CalendarInstant.millisecondsPerDay], upperExclusive: false)
        case .between:
            guard bounds.count == 2 else { return nil }
            let widen = CalendarInstant.isBareDay(texts[1])
            return .instant(
                slot: slot, op: .between,
                bounds: [bounds[0], bounds[1] + (widen ? CalendarInstant.millisecondsPerDay : 0)],
                upperExclusive: widen)
        case .eq, .ne, .gt, .gte, .lt, .lte, .in, .nin:
            return .instant(slot: slot, op: op, bounds: bounds, upperExclusive: false)
        default: return nil
        }
    }

    /// Whether the record (its canonical JSON bytes) matches.
    public func matches(_ bytes: UnsafeRawBufferPointer) -> Bool {
        Self.evaluate(root, scanner.scan(bytes))
    }

    public func matches(_ record: JSONValue) -> Bool {
        let values = scanner.keys.map { ScalarValue(record[String(decoding: $0, as: UTF8.self)]) }
        return Self.evaluate(root, values)
    }

    static func evaluate(_ node: Node, _ values: [ScalarValue]) -> Bool {
        switch node {
        case .constant(let value): return value
        case .all(let children): return children.allSatisfy { evaluate($0, values) }
        case .any(let children): return children.contains { evaluate($0, values) }
        case .not(let child): return !evaluate(child, values)
        case .instant(let slot, let op, let bounds, let upperExclusive):
            let value = values[slot]
            if value.isNullOrMissing { return nullSatisfies(op, operandIsNull: false) }
            guard case .string(let text) = value, let millis = CalendarInstant.milliseconds(text) else {
                return op == .ne || op == .nin
            }
            switch op {
            case .eq: return millis == bounds[0]
            case .ne: return millis != bounds[0]
            case .gt: return millis > bounds[0]
            case .gte: return millis >= bounds[0]
            case .lt: return millis < bounds[0]
            case .lte: return millis <= bounds[0]
            case .in: return bounds.contains(millis)
            case .nin: return !bounds.contains(millis)
            case .between: return millis >= bounds[0] && (upperExclusive ? millis < bounds[1] : millis <= bounds[1])
            default: return false
            }
        case .compare(let slot, let op, let operand):
            let value = values[slot]
            switch op {
            case .null:
                guard case .value(.bool(let wantNull)) = operand else { return false }
                return value.isNullOrMissing == wantNull
            case .exists:
                guard case .value(.bool(let wantExists)) = operand else { return false }
                return (value != .missing) == wantExists
            default: break
            }
            switch operand {
            case .list(let items):
                if value.isNullOrMissing { return nullSatisfies(op, operandIsNull: false) }
                switch op {
                case .in: return items.contains { compare(value, $0) == 0 }
                case .nin: return !items.contains { compare(value, $0) == 0 }
                case .between:
                    guard items.count == 2, let low = compare(value, items[0]), let high = compare(value, items[1])
                    else { return false }
                    return low >= 0 && high <= 0
                default: return false
                }
            case .value(let right):
                if value.isNullOrMissing { return nullSatisfies(op, operandIsNull: right.isNullOrMissing) }
                return scalar(value, op, right)
            case .field(let other):
                let right = values[other]
                switch (value.isNullOrMissing, right.isNullOrMissing) {
                case (true, true): return op == .eq
                case (true, false), (false, true): return op == .ne
                case (false, false): return scalar(value, op, right)
                }
            }
        }
    }

    /// Whether a NULL or missing field satisfies `op` (ObjectStack's two-valued answer): an equality
    /// with null is the null test, and the negative operators hold vacuously.
    static func nullSatisfies(_ op: FilterCondition.Operator, operandIsNull: Bool) -> Bool {
        switch op {
        case .eq: operandIsNull
        case .ne: !operandIsNull
        case .nin, .notContains: true
        default: false
        }
    }

    static func scalar(_ value: ScalarValue, _ op: FilterCondition.Operator, _ right: ScalarValue) -> Bool {
        switch op {
        case .eq: return !right.isNullOrMissing && compare(value, right) == 0
        case .ne: return right.isNullOrMissing || compare(value, right) != 0
        case .gt: return compare(value, right).map { $0 > 0 } ?? false
        case .gte: return compare(value, right).map { $0 >= 0 } ?? false
        case .lt: return compare(value, right).map { $0 < 0 } ?? false
        case .lte: return compare(value, right).map { $0 <= 0 } ?? false
        case .contains, .icontains, .notContains, .startsWith, .endsWith, .like, .ilike:
            guard case .string(let text) = value, case .string(let needle) = right else { return op == .notContains }
            switch op {
            case .contains: return needle.isEmpty || Self.scalarsContain(text, needle)
            case .icontains: return needle.isEmpty || Self.scalarsContain(asciiLower(text), asciiLower(needle))
            case .notContains: return !(needle.isEmpty || Self.scalarsContain(text, needle))
            case .startsWith: return text.unicodeScalars.starts(with: needle.unicodeScalars)
            case .endsWith: return text.unicodeScalars.reversed().starts(with: needle.unicodeScalars.reversed())
            case .like: return like(Array(text.unicodeScalars), Array(needle.unicodeScalars), caseInsensitive: false)
            default: return like(Array(text.unicodeScalars), Array(needle.unicodeScalars), caseInsensitive: true)
            }
        default: return false
        }
    }

    /// Orders two scalars (see the type's documentation); nil when they are not comparable.
    static func compare(_ left: ScalarValue, _ right: ScalarValue) -> Int? {
        func order<T: Comparable>(_ a: T, _ b: T) -> Int { a < b ? -1 : (a > b ? 1 : 0) }
        switch (left, right) {
        case (.number(let a), .number(let b)): return order(a, b)
        case (.string(let a), .string(let b)): return codePointOrder(a, b)
        case (.bool(let a), .bool(let b)): return a == b ? 0 : (a ? 1 : -1)
        case (.string(let a), .number(let b)): return numeric(a).map { order($0, b) }
        case (.number(let a), .string(let b)): return numeric(b).map { order(a, $0) }
        default: return nil
        }
    }

    /// A numeric string as a number: finite decimal only ("nan", "inf" and hex floats are text).
    static func numeric(_ text: String) -> Double? {
        guard !text.isEmpty,
            text.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || $0 == 45 || $0 == 43 || $0 == 46 || $0 == 101 || $0 == 69 }
            ),
            let value = Double(text), value.isFinite
        else { return nil }
        return value
    }

    /// Strings compare by code point, like the server's SQL, not by Swift's canonical equivalence
    /// ("é" precomposed and decomposed are different strings there).
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
        guard pattern.count <= haystack.count else { return false }
        for start in 0...(haystack.count - pattern.count) where haystack[start] == pattern[0] {
            if Array(haystack[start..<start + pattern.count]) == pattern { return true }
        }
        return false
    }

    static func asciiLower(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { ($0.value >= 65 && $0.value <= 90) ? Unicode.Scalar($0.value + 32)! : $0 }))
    }

    /// A LIKE pattern: `%` any run, `_` one character, `\x` the character `x` literally (a pattern
    /// ending in a lone backslash is refused when the filter is parsed, and matches nothing here).
    static func like(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar], caseInsensitive: Bool) -> Bool {
        enum Token: Equatable {
            case any, one
            case literal(Unicode.Scalar)
        }
        func fold(_ s: Unicode.Scalar) -> Unicode.Scalar {
            caseInsensitive && s.value >= 65 && s.value <= 90 ? Unicode.Scalar(s.value + 32)! : s
        }
        var tokens: [Token] = []
        var index = 0
        while index < pattern.count {
            switch pattern[index] {
            case "%": tokens.append(.any)
            case "_": tokens.append(.one)
            case "\\":
                index += 1
                guard index < pattern.count else { return false }
                tokens.append(.literal(fold(pattern[index])))
            default: tokens.append(.literal(fold(pattern[index])))
            }
            index += 1
        }
        var t = 0
        var p = 0
        var star = -1
        var mark = 0
        while t < text.count {
            if p < tokens.count && (tokens[p] == .one || tokens[p] == .literal(fold(text[t]))) {
                t += 1
                p += 1
            } else if p < tokens.count && tokens[p] == .any {
                star = p
                mark = t
                p += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                t = mark
            } else {
                return false
            }
        }
        while p < tokens.count && tokens[p] == .any { p += 1 }
        return p == tokens.count
    }
}
