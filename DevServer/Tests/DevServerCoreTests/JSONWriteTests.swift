@testable import DevServerCore
import Testing

@Suite struct JSONWriteTests {
    /// JSON's escapes, one byte at a time: the writer's model.
    static func escapedByteByByte(_ value: String) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [92, 34]
            case UInt8(ascii: "\\"): out += [92, 92]
            case 0x0A: out += [92, 110]
            case 0x0D: out += [92, 114]
            case 0x09: out += [92, 116]
            case 0..<0x20: out += Array("\\u00".utf8) + Array(String(byte, radix: 16).leftPadded(2).utf8)
            default: out.append(byte)
            }
        }
        return out + [UInt8(ascii: "\"")]
    }

    @Test func stringsAreWrittenAsTheByteByByteModelWritesThemAndReadBackTheSame() throws {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["a", "Seed 7", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1b}", "\u{1f}", "é", "𝄞", "\u{7f}", "  "]
        for length in [0, 1, 2, 3, 7, 8, 9, 64, 300] {
            for _ in 0..<40 {
                let value = (0..<length).map { _ in pieces.randomElement(using: &generator)! }.joined()
                var written: [UInt8] = []
                JSONValue.writeString(value, to: &written)
                #expect(written == Self.escapedByteByByte(value), "\(Array(value.utf8))")
                #expect(try JSONValue.parse(written) == .string(value))
            }
        }
        // Escapes at the start, in the middle and before the last byte; the string is appended to
        // what the buffer already holds.
        var out: [UInt8] = [1]
        JSONValue.writeString(String("x\"y\u{1}z".dropFirst()), to: &out)
        #expect(out == [1] + Array(#""\"y\u0001z""#.utf8))
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
