import FoundationEssentials

/// RFC 9110 IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT").
public enum HTTPDate {
    public static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, let day = Int(parts[1]), let year = Int(parts[3]) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let month = months.firstIndex(of: String(parts[2])) else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3 else { return nil }
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
        let iso = "\(year)-\(two(month + 1))-\(two(day))T\(two(time[0])):\(two(time[1])):\(two(time[2]))Z"
        return try? Date(iso, strategy: .iso8601)
    }
}
