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
