/// A strict, allocation-free syntax check of one JSON value, for records pulled from the wire before
/// they are stored as they came (docs/sync.md, "Pull"). The mirror keeps a record's bytes, and every
/// later reader decodes them; a record that is not valid JSON, nests deeper than `maxDepth` or holds
/// a number no `Double` can carry (`1e400`) would be stored and then be unreadable — found here and
/// reported instead.
public enum JSONSyntax {
    public static let maxDepth = 64

    /// Whether `bytes` is exactly one valid JSON object (with optional surrounding whitespace).
    public static func isValidObject(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var values: [FieldScanner.RawValue] = []
        var scratch: [Range<Int>] = []
        return checkObject(bytes, names: [], into: &values, scratch: &scratch)
    }

    /// The check of `isValidObject`, finding on the way the values of the object's own members named
    /// `names` as they stand in `bytes` (`values` gets one slot per name, `.missing` where absent):
    /// one pass over a pulled record checks it and finds its id, version and indexed values.
    /// `scratch` is reused between calls (the object's member names, for the repeated-name check).
    public static func checkObject(
        _ bytes: UnsafeRawBufferPointer, names: [[UInt8]], into values: inout [FieldScanner.RawValue],
        scratch: inout [Range<Int>]
    ) -> Bool {
        values.removeAll(keepingCapacity: true)
        values.append(contentsOf: repeatElement(.missing, count: names.count))
        var checker = FieldScanner.Reader(bytes: bytes)
        checker.skipSpace()
        guard checker.object(names: names, values: &values, seen: &scratch) else { return false }
        checker.skipSpace()
        return checker.index == bytes.count
    }
}

/// The strict check, on the field scanner's byte reader (its position, whitespace and byte helpers).
extension FieldScanner.Reader {
    /// The top-level object: its own members have plain names, each once (a second `id` would be
    /// read as the record's id by one reader and ignored by another). The values of members named in
    /// `names` are noted in `values` as they stand.
    mutating func object(names wanted: [[UInt8]], values: inout [FieldScanner.RawValue], seen: inout [Range<Int>])
        -> Bool
    {
        guard consume(UInt8(ascii: "{")) else { return false }
        skipSpace()
        if consume(UInt8(ascii: "}")) { return true }
        seen.removeAll(keepingCapacity: true)
        while true {
            skipSpace()
            let nameStart = index
            guard string() else { return false }
            let name = (nameStart + 1)..<(index - 1)
            let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[name])
            if nameBytes.contains(UInt8(ascii: "\\")) { return false }
            for earlier in seen where earlier.count == name.count {
                if bytes[earlier].elementsEqual(nameBytes) { return false }
            }
            seen.append(name)
            skipSpace()
            guard consume(UInt8(ascii: ":")) else { return false }
            skipSpace()
            let start = index
            guard value(depth: 1) else { return false }
            if let slot = wanted.firstIndex(where: { $0.count == name.count && $0.elementsEqual(nameBytes) }) {
                values[slot] = Self.raw(bytes, start..<index)
            }
            skipSpace()
            if consume(UInt8(ascii: ",")) { continue }
            return consume(UInt8(ascii: "}"))
        }
    }

    /// A checked value's raw form (`FieldScanner.RawValue`).
    static func raw(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> FieldScanner.RawValue {
        switch bytes[range.lowerBound] {
        case UInt8(ascii: "\""):
            let inner = (range.lowerBound + 1)..<(range.upperBound - 1)
            return .string(inner, escaped: UnsafeRawBufferPointer(rebasing: bytes[inner]).contains(UInt8(ascii: "\\")))
        case UInt8(ascii: "t"): return .bool(true)
        case UInt8(ascii: "f"): return .bool(false)
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "{"), UInt8(ascii: "["): return .compound
        default: return .number(range)
        }
    }

    mutating func value(depth: Int) -> Bool {
        guard let byte = current else { return false }
        switch byte {
        case UInt8(ascii: "{"):
            guard depth < JSONSyntax.maxDepth else { return false }
            index += 1
            skipSpace()
            if consume(UInt8(ascii: "}")) { return true }
            while true {
                skipSpace()
                guard string() else { return false }
                skipSpace()
                guard consume(UInt8(ascii: ":")) else { return false }
                skipSpace()
                guard value(depth: depth + 1) else { return false }
                skipSpace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "}"))
            }
        case UInt8(ascii: "["):
            guard depth < JSONSyntax.maxDepth else { return false }
            index += 1
            skipSpace()
            if consume(UInt8(ascii: "]")) { return true }
            while true {
                skipSpace()
                guard value(depth: depth + 1) else { return false }
                skipSpace()
                if consume(UInt8(ascii: ",")) { continue }
                return consume(UInt8(ascii: "]"))
            }
        case UInt8(ascii: "\""): return string()
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        default: return number()
        }
    }

    mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    /// A string: no raw control characters, only JSON's escapes, `\u` with four hex digits.
    mutating func string() -> Bool {
        guard consume(UInt8(ascii: "\"")), let base = bytes.baseAddress else { return false }
        let count = bytes.count
        while index < count {
            // Eight bytes at a time while none of them needs a look: no control character, no
            // quote, no backslash, nothing beyond ASCII. A test can over-report only bytes after one
            // that does need a look (a borrow runs upwards), so the lowest byte it reports is that
            // byte: the bytes before it are skipped and it is read below.
            while index + 8 <= count {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                let quote = word ^ Self.quotes
                let backslash = word ^ Self.backslashes
                let special =
                    (word | ((word &- Self.spaces) & ~word) | ((quote &- Self.ones) & ~quote)
                        | ((backslash &- Self.ones) & ~backslash)) & Self.highBits
                if special != 0 {
                    index += special.trailingZeroBitCount / 8
                    break
                }
                index += 8
            }
            guard index < count else { break }
            let byte = base.load(fromByteOffset: index, as: UInt8.self)
            index += 1
            // Printable ASCII other than the quote and the backslash: most of every record.
            if byte >= 0x20 && byte < 0x80 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") { continue }
            switch byte {
            case UInt8(ascii: "\""): return true
            // Left at the control character: `JSONValue.errorLine` names the line it is on (a raw
            // line break counted as read put the error on the next line).
            case 0..<0x20:
                index -= 1
                return false
            case UInt8(ascii: "\\"):
                guard let escape = current else { return false }
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    guard let unit = hex4() else { return false }
                    if (0xDC00...0xDFFF).contains(unit) { return false }  // a low surrogate alone
                    if (0xD800...0xDBFF).contains(unit) {
                        // A high surrogate must be followed by `\u` and a low one.
                        guard consume(UInt8(ascii: "\\")), consume(UInt8(ascii: "u")), let low = hex4(),
                            (0xDC00...0xDFFF).contains(low)
                        else { return false }
                    }
                default: return false
                }
            case 0x80...: guard utf8Sequence(lead: byte) else { return false }
            default: continue
            }
        }
        return false
    }

    // Every byte of a word set to one value (the word-at-a-time test in `string`).
    static let ones: UInt64 = 0x0101_0101_0101_0101
    static let highBits: UInt64 = 0x8080_8080_8080_8080
    static let spaces: UInt64 = 0x2020_2020_2020_2020
    static let quotes: UInt64 = 0x2222_2222_2222_2222
    static let backslashes: UInt64 = 0x5C5C_5C5C_5C5C_5C5C

    /// Four hex digits at `index` (moved past them), as a number.
    mutating func hex4() -> UInt32? {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = current, digit.isHexDigit else { return nil }
            let nibble: UInt8 =
                digit <= UInt8(ascii: "9")
                ? digit - UInt8(ascii: "0") : (digit | 0x20) - UInt8(ascii: "a") + 10
            value = value << 4 | UInt32(nibble)
            index += 1
        }
        return value
    }

    /// The rest of a UTF-8 sequence whose lead byte was just read: well-formed (no overlong
    /// forms, no surrogates, nothing above U+10FFFF).
    mutating func utf8Sequence(lead: UInt8) -> Bool {
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 1
        case 0xE0:
            length = 2
            lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 2
        case 0xED:
            length = 2
            upper = 0x9F
        case 0xF0:
            length = 3
            lower = 0x90
        case 0xF1...0xF3: length = 3
        case 0xF4:
            length = 3
            upper = 0x8F
        default: return false
        }
        for position in 0..<length {
            guard let byte = current else { return false }
            let (low, high) = position == 0 ? (lower, upper) : (0x80, 0xBF)
            guard byte >= low && byte <= high else { return false }
            index += 1
        }
        return true
    }

    /// JSON's number grammar, and a value a `Double` holds (`1e400` and `1e-400` are refused).
    mutating func number() -> Bool {
        let start = index
        _ = consume(UInt8(ascii: "-"))
        guard let first = current, first.isDigit else { return false }
        index += 1
        if first != UInt8(ascii: "0") { while let next = current, next.isDigit { index += 1 } }
        var simple = true
        if consume(UInt8(ascii: ".")) {
            guard let next = current, next.isDigit else { return false }
            while let next = current, next.isDigit { index += 1 }
        }
        if let next = current, next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
            simple = false
            index += 1
            if let sign = current, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") { index += 1 }
            guard let digit = current, digit.isDigit else { return false }
            while let next = current, next.isDigit { index += 1 }
        }
        // Without an exponent only a very long number can leave Double's range.
        if simple && index - start < 300 { return true }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return false }
        // Nor one that vanishes: a non-zero mantissa that underflows to zero or a subnormal.
        if value.magnitude < Double.leastNormalMagnitude {
            let mantissa = text.prefix { $0 != "e" && $0 != "E" }
            return !mantissa.contains { ("1"..."9").contains($0) }
        }
        return true
    }
}

extension UInt8 {
    fileprivate var isDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    fileprivate var isHexDigit: Bool {
        isDigit || (self >= UInt8(ascii: "a") && self <= UInt8(ascii: "f"))
            || (self >= UInt8(ascii: "A") && self <= UInt8(ascii: "F"))
    }
}
