/// A `FilterCondition` compiled for the local mirror: fields resolved to scanner slots, evaluated
/// with the server's semantics (PROTOCOL §8; SQL three-valued logic):
///
/// - a comparison involving NULL or a missing field is unknown (not a match); `!=` does not match NULL;
/// - `is null` matches NULL and missing; `$exists` tests presence;
/// - `$not` is NULL-safe: rows whose inner condition was unknown are returned;
/// - numbers compare numerically, strings by code point (so ISO dates order correctly), booleans
///   false < true; a numeric string compares with a number as a number; other mixes are unknown.
public struct LocalFilter: Sendable {
    public let scanner: FieldScanner
    let root: Node

    indirect enum Node: Sendable {
        case all([Node])
        case any([Node])
        case not(Node)
        case compare(slot: Int, op: FilterCondition.Operator, operand: Operand)
        case constant(Bool)
    }

    enum Operand: Sendable {
        case value(ScalarValue)
        case list([ScalarValue])
        case field(Int)
    }

    public init(_ condition: FilterCondition) {
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

    /// Whether the record (its canonical JSON bytes) matches.
    public func matches(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let values = scanner.scan(bytes)
        return Self.evaluate(root, values) == true
    }

    public func matches(_ record: JSONValue) -> Bool {
        let values = scanner.keys.map { ScalarValue(record[String(decoding: $0, as: UTF8.self)]) }
        return Self.evaluate(root, values) == true
    }

    static func evaluate(_ node: Node, _ values: [ScalarValue]) -> Bool? {
        switch node {
        case .constant(let value): return value
        case .all(let children):
            var unknown = false
            for child in children {
                switch evaluate(child, values) {
                case false?: return false
                case nil: unknown = true
                case true?: break
                }
            }
            return unknown ? nil : true
        case .any(let children):
            var unknown = false
            for child in children {
                switch evaluate(child, values) {
                case true?: return true
                case nil: unknown = true
                case false?: break
                }
            }
            return unknown ? nil : false
        case .not(let child):
            return !(evaluate(child, values) ?? false)
        case .compare(let slot, let op, let operand):
            let value = values[slot]
            switch op {
            case .null:
                guard case .value(.bool(let wantNull)) = operand else { return nil }
                return value.isNullOrMissing == wantNull
            case .exists:
                guard case .value(.bool(let wantExists)) = operand else { return nil }
                return (value != .missing) == wantExists
            default: break
            }
            if value.isNullOrMissing { return nil }
            switch operand {
            case .list(let items):
                switch op {
                case .in: return items.contains { compare(value, $0) == 0 }
                case .nin: return !items.contains { compare(value, $0) == 0 }
                case .between:
                    guard items.count == 2, let low = compare(value, items[0]), let high = compare(value, items[1])
                    else { return nil }
                    return low >= 0 && high <= 0
                default: return nil
                }
            case .value(let right): return scalar(value, op, right)
            case .field(let other): return scalar(value, op, values[other])
            }
        }
    }

    static func scalar(_ value: ScalarValue, _ op: FilterCondition.Operator, _ right: ScalarValue) -> Bool? {
        switch op {
        case .eq: return right.isNullOrMissing ? nil : compare(value, right) == 0
        case .ne: return right.isNullOrMissing ? nil : compare(value, right) != 0
        case .gt: return compare(value, right).map { $0 > 0 }
        case .gte: return compare(value, right).map { $0 >= 0 }
        case .lt: return compare(value, right).map { $0 < 0 }
        case .lte: return compare(value, right).map { $0 <= 0 }
        case .contains, .icontains, .notContains, .startsWith, .endsWith, .like, .ilike:
            guard case .string(let text) = value, case .string(let needle) = right else { return nil }
            switch op {
            case .contains: return needle.isEmpty || Self.scalarsContain(text, needle)
            case .icontains: return needle.isEmpty || Self.scalarsContain(asciiLower(text), asciiLower(needle))
            case .notContains: return !(needle.isEmpty || Self.scalarsContain(text, needle))
            case .startsWith: return text.unicodeScalars.starts(with: needle.unicodeScalars)
            case .endsWith: return text.unicodeScalars.reversed().starts(with: needle.unicodeScalars.reversed())
            case .like: return like(Array(text.unicodeScalars), Array(needle.unicodeScalars), caseInsensitive: false)
            default: return like(Array(text.unicodeScalars), Array(needle.unicodeScalars), caseInsensitive: true)
            }
        default: return nil
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

    /// SQL LIKE with `%` and `_`.
    static func like(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar], caseInsensitive: Bool) -> Bool {
        func fold(_ s: Unicode.Scalar) -> Unicode.Scalar {
            caseInsensitive && s.value >= 65 && s.value <= 90 ? Unicode.Scalar(s.value + 32)! : s
        }
        var t = 0
        var p = 0
        var star = -1
        var mark = 0
        while t < text.count {
            if p < pattern.count && (pattern[p] == "_" || fold(pattern[p]) == fold(text[t])) {
                t += 1
                p += 1
            } else if p < pattern.count && pattern[p] == "%" {
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
        while p < pattern.count && pattern[p] == "%" { p += 1 }
        return p == pattern.count
    }
}
