import FoundationEssentials
import Glibc

/// UTC ISO 8601 timestamps ("2026-11-23T01:46:44Z", or with milliseconds "2026-11-23T01:46:44.305Z"),
/// formatted by hand: Foundation's formatter loads calendar data on first use, which cost every
/// audited command 10–30 ms. Used by the audit trails and the debug log.
enum Timestamp {
    static func iso8601(secondsSince1970 time: Double, milliseconds: Bool) -> String {
        let totalMilliseconds = Int64((time * 1000).rounded(.down))
        var seconds = time_t(totalMilliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        let date = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
        let clock = "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
        let fraction = milliseconds ? "." + pad(Int32(totalMilliseconds % 1000), 3) : ""
        return "\(date)T\(clock)\(fraction)Z"
    }
}

extension Timestamp {
    /// Parses `YYYY-MM-DDTHH:MM:SSZ` by hand (what ostack's own files hold, written with the
    /// `.iso8601` strategy) and hands any other spelling to Foundation's ISO 8601 parser, so the
    /// result is always the one `.iso8601` decoding gives — without loading calendar data for the
    /// common case (`status --short` reads two files with dates before every shell prompt).
    static func parseISO8601(_ text: String) -> Date? {
        if let date = text.utf8.withContiguousStorageIfAvailable(fastParse) ?? nil { return date }
        return try? Date(text, strategy: .iso8601)
    }

    private static func fastParse(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        // 0123456789012345678 9
        // 2026-11-23T01:46:44 Z
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ start: Int, _ count: Int) -> Int32? {
            var value: Int32 = 0
            for index in start..<start + count {
                let digit = bytes[index] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int32(digit)
            }
            return value
        }
        guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month), (1...31).contains(day),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let seconds = timegm(&parts)
        // timegm normalises an impossible day (Feb 30) into the next month; Foundation would refuse it.
        guard parts.tm_mday == day, parts.tm_mon == month - 1 else { return nil }
        return Date(timeIntervalSince1970: Double(seconds))
    }

    /// The JSON date strategy for ostack's files: the same dates as `.iso8601`, parsed faster.
    static let decodingStrategy = JSONDecoder.DateDecodingStrategy.custom { decoder in
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let date = parseISO8601(text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "Expected date string to be ISO8601-formatted.")
        }
        return date
    }
}
