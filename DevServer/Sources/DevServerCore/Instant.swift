/// ISO-8601 dates and date-times as milliseconds since the Unix epoch (proleptic Gregorian, UTC),
/// for typed comparisons on `datetime` fields. Written independently of the client's copy, so that
/// the dev server stays an oracle for it.
enum Instant {
    static let day: Int64 = 86_400_000

    /// `YYYY-MM-DD` (that day's midnight) or `YYYY-MM-DD(T| )HH:MM[:SS[.f…]][Z|±HH[:]MM]`.
    static func milliseconds(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= b.count, !range.isEmpty else { return nil }
            var value: Int64 = 0
            for i in range {
                guard (48...57).contains(b[i]) else { return nil }
                value = value * 10 + Int64(b[i] - 48)
            }
            return value
        }
        guard b.count >= 10, b[4] == 45, b[7] == 45, let year = number(0..<4), let month = number(5..<7),
            let dayOfMonth = number(8..<10), (1...12).contains(month), dayOfMonth >= 1,
            dayOfMonth <= monthLength(year, month)
        else { return nil }
        let midnight = epochDay(year, month, dayOfMonth) * day
        if b.count == 10 { return midnight }
        guard b.count >= 16, b[10] == 84 || b[10] == 32, b[13] == 58, let hour = number(11..<13), hour < 24,
            let minute = number(14..<16), minute < 60
        else { return nil }
        var i = 16
        var second: Int64 = 0
        var fraction: Int64 = 0
        if i < b.count && b[i] == 58 {
            guard let s = number(i + 1..<i + 3), s <= 60 else { return nil }
            second = min(s, 59)
            i += 3
            if i < b.count && (b[i] == 46 || b[i] == 44) {
                i += 1
                var digits = 0
                while i < b.count, (48...57).contains(b[i]) {
                    if digits < 3 { fraction = fraction * 10 + Int64(b[i] - 48) }
                    digits += 1
                    i += 1
                }
                guard digits > 0 else { return nil }
                if digits < 3 { for _ in digits..<3 { fraction *= 10 } }
            }
        }
        var offset: Int64 = 0
        if i < b.count && (b[i] == 90 || b[i] == 122) {
            i += 1
        } else if i < b.count && (b[i] == 43 || b[i] == 45) {
            let sign: Int64 = b[i] == 43 ? 1 : -1
            guard let hours = number(i + 1..<i + 3), hours < 24 else { return nil }
            i += 3
            if i < b.count && b[i] == 58 { i += 1 }
            guard let minutes = number(i..<i + 2), minutes < 60 else { return nil }
            i += 2
            offset = sign * (hours * 60 + minutes)
        }
        guard i == b.count else { return nil }
        return midnight + ((hour * 60 + minute - offset) * 60 + second) * 1000 + fraction
    }

    static func isBareDay(_ text: String) -> Bool {
        text.utf8.count == 10 && milliseconds(text) != nil
    }

    static func monthLength(_ year: Int64, _ month: Int64) -> Int64 {
        if month == 2 { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28 }
        return [4, 6, 9, 11].contains(month) ? 30 : 31
    }

    /// Days since 1970-01-01, by counting whole years and months (negative before 1970).
    static func epochDay(_ year: Int64, _ month: Int64, _ dayOfMonth: Int64) -> Int64 {
        func leapDaysBefore(_ y: Int64) -> Int64 {  // leap years in [1, y)
            let p = y - 1
            return floorDiv(p, 4) - floorDiv(p, 100) + floorDiv(p, 400)
        }
        let yearDays = (year - 1970) * 365 + leapDaysBefore(year) - leapDaysBefore(1970)
        var days = yearDays
        for m in 1..<month { days += monthLength(year, m) }
        return days + dayOfMonth - 1
    }

    static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        a >= 0 ? a / b : -((-a + b - 1) / b)
    }
}
