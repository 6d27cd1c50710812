import Glibc

/// Starts `ostack-devserver` on a free loopback port for one test and kills it (SIGKILL) after.
/// The binary comes from `OSTACK_DEVSERVER` or `<repo>/DevServer/.build/debug/ostack-devserver`
/// (`make test` builds it first).
public final class DevServerProcess: @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    public let process: ChildProcess
    public let url: String
    public let port: Int

    public static var binary: String {
        if let explicit = ProcessInfoLite.environment("OSTACK_DEVSERVER") { return explicit }
        let file = #filePath  // <repo>/Sources/OStackTestSupport/DevServerProcess.swift
        var repo = file
        for _ in 0..<3 { repo = String(repo[..<repo.lastIndex(of: "/")!]) }
        return repo + "/DevServer/.build/debug/ostack-devserver"
    }

    public init(arguments: [String] = []) throws {
        guard access(Self.binary, X_OK) == 0 else {
            throw LaunchError(message: "ostack-devserver not built at \(Self.binary): run `make devserver`")
        }
        process = try ChildProcess(executable: Self.binary, arguments: ["--port", "0"] + arguments)
        guard let line = try process.readLine(timeout: 30), line.hasPrefix("listening on http://127.0.0.1:"),
            let port = Int(line.split(separator: ":").last ?? "")
        else {
            process.kill()
            throw LaunchError(message: "ostack-devserver did not start: \(process.stderrText())")
        }
        self.port = port
        url = "http://127.0.0.1:\(port)"
    }

    deinit { process.kill() }

    /// Kills the server and returns its port held (`HeldPort`): keep it for as long as the test
    /// needs the server to be unreachable.
    public func stop() throws -> HeldPort {
        process.kill()
        guard let held = HeldPort(port) else { throw LaunchError(message: "port \(port) was taken as soon as it was freed") }
        return held
    }

    public struct LaunchError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// Calls a `/__control__/` endpoint with a JSON body and returns the response body text.
    @discardableResult
    public func control(_ method: String, _ path: String, _ json: String = "{}") throws -> String {
        let result = try runProcess(
            executable: "/usr/bin/curl",
            arguments: [
                "-s", "-X", method, "-H", "Content-Type: application/json", "--data-binary", "@-",
                url + "/__control__/" + path,
            ],
            stdin: Array(json.utf8), timeout: 60)
        guard result.status == 0 else { throw LaunchError(message: "control \(path) failed: \(result.stderr)") }
        return result.stdout
    }

    /// A session token of the user's own, signed in past ostack (another session of the same user).
    public func signIn(_ email: String, _ password: String) throws -> String {
        let result = try runProcess(
            executable: "/usr/bin/curl",
            arguments: [
                "-s", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "@-",
                url + "/api/v1/auth/sign-in/email",
            ],
            stdin: Array(#"{"email":"\#(email)","password":"\#(password)"}"#.utf8), timeout: 60)
        guard let range = result.stdout.firstRange(of: #""token":""#) else {
            throw LaunchError(message: "sign-in failed: \(result.stdout)")
        }
        return String(result.stdout[range.upperBound...].prefix { $0 != "\"" })
    }
}
