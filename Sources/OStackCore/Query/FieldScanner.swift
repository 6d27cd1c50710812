import Glibc

/// A scalar as the filter evaluator sees a record's field (docs/filters.md, "Semantics").
public enum ScalarValue: Sendable, Equatable {
    case missing
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    /// An array or object: never equal to, or ordered against, a scalar.
    case compound

    public init(_ json: JSONValue?) {
        switch json {
        case nil: self = .missing
        case .null?: self = .null
        case .bool(let value)?: self = .bool(value)
        case .number(let value)?: self = .number(value)
        case .string(let value)?: self = .string(value)
        case .array?, .object?: self = .compound
        }
    }

    public var isNullOrMissing: Bool { self == .null || self == .missing }
}

/// Reads chosen top-level members of a JSON object straight from its UTF-8 bytes, without building
/// a document: the local query path calls it for every row of a scan (docs/sync.md, "Performance").
///
/// The input is JSON ostack wrote itself (a record's canonical serialisation), but the scanner is
/// defensive: malformed input yields `.missing` for what it could not read, never a trap.
public struct FieldScanner: Sendable {
    public let keys: [[UInt8]]

    public init(fields: [String]) {
        keys = fields.map { Array($0.utf8) }
    }

    /// Values for `keys`, in order; `.missing` for absent keys.
    public func scan(_ bytes: UnsafeRawBufferPointer) -> [ScalarValue] {
        var result = [ScalarValue](repeating: .missing, count: keys.count)
        guard bytes.count > 1 else { return result }
        var reader = Reader(bytes: bytes)
        reader.skipSpace()
        guard reader.consume(UInt8(ascii: "{")) else { return result }
        var remaining = keys.count
        while remaining > 0 {
            reader.skipSpace()
            guard let keyRange = reader.stringRange() else { return result }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return result }
            reader.skipSpace()
            if let slot = match(keyRange, in: bytes) {
                if case .missing = result[slot] { remaining -= 1 }
                result[slot] = reader.value()
            } else if !reader.skipValue() {
                return result
            }
            reader.skipSpace()
            if reader.consume(UInt8(ascii: ",")) { continue }
            return result
        }
        return result
    }

    /// One field, without allocating a scanner (the `ostack_field` SQL function's hot path).
    public static func value(of key: UnsafeRawBufferPointer, in bytes: UnsafeRawBufferPointer) -> ScalarValue {
        guard bytes.count > 1 else { return .missing }
        var reader = Reader(bytes: bytes)
        reader.skipSpace()
        guard reader.consume(UInt8(ascii: "{")) else { return .missing }
        while true {
            reader.skipSpace()
            guard let range = reader.stringRange() else { return .missing }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return .missing }
            reader.skipSpace()
            let length = range.end - range.start
            var equal = !range.escaped && length == key.count
            if equal {
                for offset in 0..<length where bytes[range.start + offset] != key[offset] {
                    equal = false
                    break
                }
            } else if range.escaped {
                equal = Array(Reader.decode(bytes, range).utf8).elementsEqual(key)
            }
            if equal { return reader.value() }
            guard reader.skipValue() else { return .missing }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ",")) else { return .missing }
        }
    }

    public func scan(_ bytes: [UInt8]) -> [ScalarValue] {
        bytes.withUnsafeBytes { scan($0) }
    }

    /// A member's value where it stands in the bytes, not decoded: for writers that copy values out
    /// as they are (`records export`).
    public enum RawValue: Sendable, Equatable {
        case missing
        case null
        case bool(Bool)
        /// The number's text.
        case number(Range<Int>)
        /// Between the quotes; `escaped` when it holds a backslash escape (`decodeString` reads it).
        case string(Range<Int>, escaped: Bool)
        case compound
    }

    /// Like `scan`, without decoding strings or numbers; `result` is reused (one slot per key).
    public func scanRaw(_ bytes: UnsafeRawBufferPointer, into result: inout [RawValue]) {
        result.removeAll(keepingCapacity: true)
        result.append(contentsOf: repeatElement(.missing, count: keys.count))
        guard bytes.count > 1 else { return }
        var reader = Reader(bytes: bytes)
        reader.skipSpace()
        guard reader.consume(UInt8(ascii: "{")) else { return }
        var remaining = keys.count
        var hint = 0
        while remaining > 0 {
            reader.skipSpace()
            guard let keyRange = reader.stringRange() else { return }
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return }
            reader.skipSpace()
            if let slot = match(keyRange, in: bytes, hint: hint) {
                hint = slot + 1
                if case .missing = result[slot] { remaining -= 1 }
                result[slot] = reader.rawValue()
            } else if !reader.skipValue() {
                return
            }
            reader.skipSpace()
            if reader.consume(UInt8(ascii: ",")) { continue }
            return
        }
    }

    /// The text of a string `scanRaw` found, escapes decoded.
    public static func decodeString(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, escaped: Bool) -> String {
        Reader.decode(bytes, Reader.StringRange(start: range.lowerBound, end: range.upperBound, escaped: escaped))
    }

    /// The slot of the key at `range`. `hint` (the slot after the last match) is tried first:
    /// records of one object usually keep their keys in one order.
    private func match(_ range: Reader.StringRange, in bytes: UnsafeRawBufferPointer, hint: Int = 0) -> Int? {
        if !range.escaped, hint < keys.count, Self.equal(keys[hint], bytes, range) { return hint }
        for (slot, key) in keys.enumerated() {
            if range.escaped {
                if Array(Reader.decode(bytes, range).utf8) == key { return slot }
            } else if Self.equal(key, bytes, range) {
                return slot
            }
        }
        return nil
    }

    /// `key` is the bytes of the unescaped string at `range`.
    private static func equal(_ key: [UInt8], _ bytes: UnsafeRawBufferPointer, _ range: Reader.StringRange) -> Bool {
        let length = range.end - range.start
        guard key.count == length, length > 0 else { return key.count == length }
        return key.withUnsafeBytes { memcmp($0.baseAddress!, bytes.baseAddress! + range.start, length) == 0 }
    }

    struct Reader {
        struct StringRange {
            var start: Int
            var end: Int
            var escaped: Bool
        }

        let bytes: UnsafeRawBufferPointer
        var index = 0

        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipSpace() {
            while let byte = current, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { index += 1 }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard current == byte else { return false }
            index += 1
            return true
        }

        /// The bytes between the quotes of a string at `index` (which then moves past it).
        mutating func stringRange() -> StringRange? {
            guard consume(UInt8(ascii: "\"")), let base = bytes.baseAddress else { return nil }
            let start = index
            let count = bytes.count
            var escaped = false
            var at = index
            // The hottest loop of every scan: raw loads, no optional per byte.
            while at < count {
                let byte = base.load(fromByteOffset: at, as: UInt8.self)
                if byte == UInt8(ascii: "\\") {
                    escaped = true
                    at += 2
                    continue
                }
                if byte == UInt8(ascii: "\"") {
                    index = at + 1
                    return StringRange(start: start, end: at, escaped: escaped)
                }
                at += 1
            }
            index = at
            return nil
        }

        static func decode(_ bytes: UnsafeRawBufferPointer, _ range: StringRange) -> String {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[range.start..<min(range.end, bytes.count)])
            guard range.escaped else { return String(decoding: slice, as: UTF8.self) }
            var scalars = String.UnicodeScalarView()
            var output: [UInt8] = []
            func flush() {
                if !output.isEmpty {
                    scalars.append(contentsOf: String(decoding: output, as: UTF8.self).unicodeScalars)
                    output.removeAll(keepingCapacity: true)
                }
            }
            var i = 0
            var pendingHigh: UInt32?
            while i < slice.count {
                let byte = slice[i]
                guard byte == UInt8(ascii: "\\"), i + 1 < slice.count else {
                    output.append(byte)
                    i += 1
                    continue
                }
                let escape = slice[i + 1]
                i += 2
                switch escape {
                case UInt8(ascii: "n"): output.append(0x0A)
                case UInt8(ascii: "t"): output.append(0x09)
                case UInt8(ascii: "r"): output.append(0x0D)
                case UInt8(ascii: "b"): output.append(0x08)
                case UInt8(ascii: "f"): output.append(0x0C)
                case UInt8(ascii: "u"):
                    guard i + 4 <= slice.count,
                        let code = UInt32(
                            String(decoding: UnsafeRawBufferPointer(rebasing: slice[i..<i + 4]), as: UTF8.self),
                            radix: 16)
                    else { return String(decoding: slice, as: UTF8.self) }
                    i += 4
                    flush()
                    if (0xD800..<0xDC00).contains(code) {
                        pendingHigh = code
                    } else if (0xDC00..<0xE000).contains(code), let high = pendingHigh {
                        let combined = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)
                        scalars.append(Unicode.Scalar(combined) ?? "\u{FFFD}")
                        pendingHigh = nil
                    } else {
                        scalars.append(Unicode.Scalar(code) ?? "\u{FFFD}")
                    }
                default: output.append(escape)
                }
            }
            flush()
            return String(scalars)
        }

        mutating func value() -> ScalarValue {
            guard let byte = current else { return .missing }
            switch byte {
            case UInt8(ascii: "\""):
                guard let range = stringRange() else { return .missing }
                return .string(Self.decode(bytes, range))
            case UInt8(ascii: "t"):
                index += 4
                return .bool(true)
            case UInt8(ascii: "f"):
                index += 5
                return .bool(false)
            case UInt8(ascii: "n"):
                index += 4
                return .null
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                return skipValue() ? .compound : .missing
            default:
                let range = numberRange()
                let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
                return Double(text).map { .number($0) } ?? .missing
            }
        }

        mutating func rawValue() -> RawValue {
            guard let byte = current else { return .missing }
            switch byte {
            case UInt8(ascii: "\""):
                guard let range = stringRange() else { return .missing }
                return .string(range.start..<range.end, escaped: range.escaped)
            case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                switch value() {
                case .bool(let flag): return .bool(flag)
                default: return .null
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                return skipValue() ? .compound : .missing
            default:
                let range = numberRange()
                return range.isEmpty ? .missing : .number(range)
            }
        }

        /// The characters a number may hold, from `index` (moved past them).
        mutating func numberRange() -> Range<Int> {
            let start = index
            while let next = current,
                (next >= UInt8(ascii: "0") && next <= UInt8(ascii: "9")) || next == UInt8(ascii: "-")
                    || next == UInt8(ascii: "+") || next == UInt8(ascii: ".") || next == UInt8(ascii: "e")
                    || next == UInt8(ascii: "E")
            {
                index += 1
            }
            return start..<index
        }

        /// Skips one value; false when the input ends or is malformed.
        mutating func skipValue() -> Bool {
            guard let byte = current else { return false }
            switch byte {
            case UInt8(ascii: "\""): return stringRange() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while let next = current {
                    switch next {
                    case UInt8(ascii: "\""):
                        guard stringRange() != nil else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 {
                            index += 1
                            return true
                        }
                    default: break
                    }
                    index += 1
                }
                return false
            default:
                while let next = current, next != UInt8(ascii: ","), next != UInt8(ascii: "}") { index += 1 }
                return true
            }
        }
    }
}

extension FieldScanner {
    /// The byte ranges of the objects in a list response's `records` array (docs/protocol.md, "Records"), found
    /// without decoding them, `hasMore` and `total` (a non-negative integer, else nil). Nil when the
    /// body is not such a response.
    public static func recordRanges(in body: UnsafeRawBufferPointer) -> (
        ranges: [Range<Int>], hasMore: Bool?, total: Int?
    )? {
        objectRanges(of: "records", in: body)
    }

    /// Like `recordRanges`, for the array of objects under any top-level key (the registry's `accounts`).
    public static func objectRanges(of arrayKey: String, in body: UnsafeRawBufferPointer) -> (
        ranges: [Range<Int>], hasMore: Bool?, total: Int?
    )? {
        var reader = Reader(bytes: body)
        reader.skipSpace()
        guard reader.consume(UInt8(ascii: "{")) else { return nil }
        var ranges: [Range<Int>]?
        var hasMore: Bool?
        var total: Int?
        let recordsKey = Array(arrayKey.utf8)
        let hasMoreKey = Array("hasMore".utf8)
        let totalKey = Array("total".utf8)
        reader.skipSpace()
        if reader.consume(UInt8(ascii: "}")) { return nil }
        while true {
            reader.skipSpace()
            guard let key = reader.stringRange() else { return nil }
            let name = Array(UnsafeRawBufferPointer(rebasing: body[key.start..<key.end]))
            reader.skipSpace()
            guard reader.consume(UInt8(ascii: ":")) else { return nil }
            reader.skipSpace()
            if name == recordsKey {
                guard reader.consume(UInt8(ascii: "[")) else { return nil }
                var found: [Range<Int>] = []
                reader.skipSpace()
                if !reader.consume(UInt8(ascii: "]")) {
                    while true {
                        reader.skipSpace()
                        let start = reader.index
                        guard reader.current == UInt8(ascii: "{"), reader.skipValue() else { return nil }
                        found.append(start..<reader.index)
                        reader.skipSpace()
                        if reader.consume(UInt8(ascii: ",")) { continue }
                        guard reader.consume(UInt8(ascii: "]")) else { return nil }
                        break
                    }
                }
                ranges = found
            } else if name == hasMoreKey {
                if case .bool(let flag) = reader.value() { hasMore = flag } else { return nil }
            } else if name == totalKey {
                if case .number(let number) = reader.value(), number >= 0, number <= 1e15, number == number.rounded() {
                    total = Int(number)
                }
            } else if !reader.skipValue() {
                return nil
            }
            reader.skipSpace()
            if reader.consume(UInt8(ascii: ",")) { continue }
            guard reader.consume(UInt8(ascii: "}")) else { return nil }
            break
        }
        return ranges.map { ($0, hasMore, total) }
    }
}
