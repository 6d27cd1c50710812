import Glibc

/// Produces `updated_at` values: ISO-8601 UTC with milliseconds, strictly increasing across all
/// writes, even several in one millisecond (the version token of docs/protocol.md#records).
struct VersionClock {
    private var last: Int64 = 0

    mutating func next() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let now = Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000
        last = max(now, last + 1)
        return Self.format(millis: last)
    }

    /// `next()` for a server that stores microseconds (`--microsecond-stamps`, ObjectStack's SQL
    /// driver on Postgres: `knex.fn.now()` into a `timestamptz`): strictly increasing in
    /// microseconds; the text is what the wire shows (milliseconds, node-pg's `Date`), the
    /// microseconds within that millisecond stay on the server.
    mutating func nextMicros() -> (text: String, micros: Int32) {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let now = Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
        lastMicros = max(now, lastMicros + 1, last * 1000)
        last = max(last, lastMicros / 1000)
        return (Self.format(millis: lastMicros / 1000), Int32(lastMicros % 1000))
    }

    private var lastMicros: Int64 = 0

    /// A stamp given from outside (a test's): later stamps come after it, so storage stays in order.
    mutating func observe(millis: Int64) { last = max(last, millis) }

    static func format(millis: Int64) -> String { VersionClockFormat.format(millis: millis) }
}

/// ISO-8601 UTC with milliseconds.
public enum VersionClockFormat {
    /// An ISO 8601 date-time as milliseconds since the epoch, or nil.
    public static func millis(_ text: String) -> Int64? { Instant.milliseconds(text) }

    public static func format(millis: Int64) -> String {
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis % 1000), 3))Z"
    }
}
