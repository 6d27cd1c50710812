import Foundation

/// Runs `ostack` on a pseudo-terminal (a real one, through python3's `pty`), answering its prompts:
/// for tests of what a person at a terminal sees and types. Each step waits (up to 20 s) for text to
/// appear on the terminal, then types a line.
public struct TerminalSession {
    public struct Step: Sendable {
        public var expect: String
        public var type: String

        public init(expect: String, type: String) {
            self.expect = expect
            self.type = type
        }
    }

    public struct Result: Sendable {
        public var status: Int32
        /// Everything the program wrote to the terminal (stdout and stderr both go there).
        public var screen: String
    }

    static let driver = """
        import json, os, pty, select, sys, time
        spec = json.loads(sys.argv[1])
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(spec["argv"][0], spec["argv"], spec["env"])
        out = b""
        def read_until(needle, seconds):
            global out
            end = time.time() + seconds
            while needle.encode() not in out and time.time() < end:
                ready, _, _ = select.select([fd], [], [], 0.1)
                if ready:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:
                        return False
                    if not chunk:
                        return False
                    out += chunk
            return needle.encode() in out
        for step in spec["steps"]:
            if not read_until(step["expect"], 20):
                break
            os.write(fd, (step["type"] + "\\n").encode())
        end = time.time() + 30
        status = None
        while time.time() < end:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                    if chunk:
                        out += chunk
                except OSError:
                    pass
            done, code = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(code)
                break
        if status is None:
            os.kill(pid, 9)
            status = -9
        sys.stdout.write(json.dumps({"status": status, "screen": out.decode("utf-8", "replace")}))
        """

    /// Runs `ostack arguments` with `environment` on a new terminal, answering `steps` in order.
    public static func run(_ arguments: [String], environment: [String: String], steps: [Step]) throws -> Result {
        let spec: [String: Any] = [
            "argv": [OStackBinary.path] + arguments, "env": environment,
            "steps": steps.map { ["expect": $0.expect, "type": $0.type] },
        ]
        let specText = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        let result = try runProcess(
            executable: "/usr/bin/python3", arguments: ["-c", driver, specText], environment: environment,
            timeout: 90)
        guard let json = (try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8))) as? [String: Any],
            let status = json["status"] as? Int, let screen = json["screen"] as? String
        else {
            return Result(status: -1, screen: result.stdout + result.stderr)
        }
        return Result(status: Int32(status), screen: screen)
    }
}
