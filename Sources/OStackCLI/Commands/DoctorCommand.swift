import ArgumentParser
import FoundationEssentials
import OStackCore

/// `ostack doctor [--json]` (SPEC §10): exit 0 when no check fails, 1 otherwise.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor", abstract: "Check the keyring, files, databases, sessions, sync and audit trails.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "Only this account (default: every account).") var target: String?

    func run() async throws {
        try await CommandRunner.run(global) { context in
            let environment = try context.makeAuthEnvironment(context)
            var doctor = Doctor(environment: environment)
            let transport = environment.transport
            doctor.probeServerDate = { account in
                let request = TransportRequest(method: "GET", url: account.server.url("/api/v1/discovery"))
                guard let response = try? transport.send(request), let date = response.header("Date") else {
                    return nil
                }
                return HTTPDate.parse(date)
            }
            let accounts =
                try target.map { [try AccountSelection(accounts: context.registry.accounts()).resolve($0)] }
                ?? context.registry.accounts()
            let checks = doctor.run(accounts: accounts)
            let ok = !checks.contains { $0.status == .fail }
            struct Document: Encodable {
                var ok: Bool
                var checks: [Doctor.Check]
            }
            context.emit(json: Document(ok: ok, checks: checks)) {
                checks.map { check in
                    let mark = ["ok": "ok  ", "warn": "warn", "fail": "FAIL"][check.status.rawValue] ?? "?"
                    var line = "\(mark)  \(check.account.map { "\($0): " } ?? "")\(check.name): \(check.message)"
                    if let fix = check.fix, check.status != .ok { line += "\n      fix: \(fix)" }
                    return ErrorPresenter.sanitize(line, maxLength: 400)
                }.joined(separator: "\n")
            }
            if !ok { throw ExitCode(1) }
        }
    }
}

/// RFC 9110 IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT").
enum HTTPDate {
    static func parse(_ text: String) -> Date? {
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
