/// ISO-8601 calendar arithmetic for filters on `datetime` fields, without Foundation.
///
/// ObjectStack compares a `datetime` field as an instant, and gives a bare day (`YYYY-MM-DD`) used
/// as a bound on such a field a typed meaning (its `temporal` conformance table): a lower bound or an
/// equality is that day's midnight (UTC), and an inclusive upper bound (`<=`, the maximum of
/// `between`) covers the whole day, half-open at the next midnight. `date` and `time` fields compare
/// as text and are never widened. See docs/filters.md.
public enum CalendarInstant {
    /// Milliseconds since 1970-01-01T00:00:00Z for `YYYY-MM-DD`, or for
    /// `YYYY-MM-DD[T| ]HH:MM[:SS[.fff…]][Z|±HH[:]MM]` (no zone means UTC); nil for anything else.
    public static func milliseconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard let day = bareDayMilliseconds(bytes, upTo: 10) else { return nil }
        if bytes.count == 10 { return day }
        guard bytes.count >= 16, bytes[10] == UInt8(ascii: "T") || bytes[10] == UInt8(ascii: " ") else {
            return nil
        }
        var reader = Reader(bytes: bytes, index: 11)
        guard let hour = reader.digits(2), hour < 24, reader.take(":"), let minute = reader.digits(2), minute < 60
        else { return nil }
        var second: Int64 = 0
        var millis: Int64 = 0
        if reader.take(":") {
            guard let value = reader.digits(2), value < 61 else { return nil }
            second = min(value, 59)
            if reader.take(".") || reader.take(",") {
                var scale: Int64 = 100
                var seen = false
                while let digit = reader.digit() {
                    millis += digit * scale
                    scale /= 10
                    seen = true
                }
                guard seen else { return nil }
            }
        }
        var offsetMinutes: Int64 = 0
        if reader.take("Z") || reader.take("z") {
        } else if let sign = reader.sign() {
            guard let hours = reader.digits(2), hours < 24 else { return nil }
            _ = reader.take(":")
            guard let minutes = reader.digits(2), minutes < 60 else { return nil }
            offsetMinutes = sign * (hours * 60 + minutes)
        }
        guard reader.atEnd else { return nil }
        return day + ((hour * 60 + minute - offsetMinutes) * 60 + second) * 1000 + millis
    }

    /// Whether `text` is exactly a calendar day, `YYYY-MM-DD`.
    public static func isBareDay(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 10 && bareDayMilliseconds(bytes, upTo: 10) != nil
    }

    public static let millisecondsPerDay: Int64 = 86_400_000

    static func bareDayMilliseconds(_ bytes: [UInt8], upTo end: Int) -> Int64? {
        guard bytes.count >= end, end == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else {
            return nil
        }
        var reader = Reader(bytes: bytes, index: 0)
        guard let year = reader.digits(4), reader.take("-"), let month = reader.digits(2), reader.take("-"),
            let day = reader.digits(2), (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        return daysFromCivil(year: year, month: month, day: day) * millisecondsPerDay
    }

    static func isLeap(_ year: Int64) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (negative before the epoch).
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    struct Reader {
        let bytes: [UInt8]
        var index: Int

        var atEnd: Bool { index == bytes.count }

        mutating func digit() -> Int64? {
            guard index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 else { return nil }
            index += 1
            return Int64(bytes[index - 1] - 48)
        }

        mutating func digits(_ count: Int) -> Int64? {
            var value: Int64 = 0
            for _ in 0..<count {
                guard let digit = digit() else { return nil }
                value = value * 10 + digit
            }
            return value
        }

        mutating func take(_ character: Unicode.Scalar) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(character.value) else { return false }
            index += 1
            return true
        }

        mutating func sign() -> Int64? {
            if take("+") { return 1 }
            if take("-") { return -1 }
            return nil
        }
    }
}
