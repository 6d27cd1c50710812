// ostack-devserver — an ObjectStack-compatible server on 127.0.0.1 for ostack's tests, demo and
// benchmarks. See docs/devserver.md. Flags:
//   --port N (0 = any free port)        --host 127.0.0.1|localhost (nothing else is accepted)
//   --user EMAIL:PASSWORD:NAME (repeat; replaces alice and bob)
//   --api-key EMAIL:osk_… (repeat)      --session-ttl SECONDS   --update-age SECONDS
//   --rotate-tokens [--rotation-grace SECONDS]   --batch-cap N   --latency-ms N
//   --user-totp EMAIL:BASE32 (repeat)   --user-backup-codes EMAIL:CODE,CODE (repeat)
//   --api-path /api/v1   --environment ID (repeat)   --organization ID:NAME (repeat)
//   --conformance-objects (also serve the conformance-table objects)
// Invented (not real-server) behaviour, off by default:
//   --honour-idempotency-key   --conditional-batch   --assign-ids   --microsecond-stamps
import DevServer
import DevServerCore
import Glibc

func fail(_ message: String) -> Never {
    _ = "ostack-devserver: \(message)\n".withCString { write(2, $0, strlen($0)) }
    exit(64)
}

var configuration = DevServerConfiguration()
var customUsers: [DevServerConfiguration.User] = []
var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func value(_ flag: String) -> String {
    guard !arguments.isEmpty else { fail("\(flag) needs a value") }
    return arguments.removeFirst()
}
@MainActor func number(_ flag: String) -> Double {
    guard let number = Double(value(flag)), number >= 0 else { fail("\(flag) needs a number") }
    return number
}
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    switch flag {
    case "--port": configuration.port = Int(number(flag))
    case "--host": configuration.host = value(flag)
    case "--user":
        let parts = value(flag).split(separator: ":", maxSplits: 2).map(String.init)
        guard parts.count == 3 else { fail("--user takes EMAIL:PASSWORD:NAME") }
        customUsers.append(.init(email: parts[0], password: parts[1], name: parts[2]))
    case "--api-key":
        let parts = value(flag).split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, parts[1].hasPrefix("osk_") else { fail("--api-key takes EMAIL:osk_…") }
        configuration.apiKeys[parts[1]] = parts[0]
    case "--session-ttl": configuration.sessionTTL = number(flag)
    case "--update-age": configuration.updateAge = number(flag)
    case "--rotate-tokens": configuration.rotateTokens = true
    case "--rotation-grace": configuration.rotationGrace = number(flag)
    case "--batch-cap": configuration.batchCap = max(1, Int(number(flag)))
    case "--latency-ms": configuration.latencyMilliseconds = Int(number(flag))
    case "--honour-idempotency-key": configuration.honourIdempotencyKey = true
    case "--conditional-batch": configuration.conditionalBatch = true
    case "--assign-ids": configuration.assignIDs = true
    case "--microsecond-stamps": configuration.microsecondStamps = true
    case "--conformance-objects": configuration.conformanceObjects = true
    case "--user-totp":
        let parts = value(flag).split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let key = OneTimePassword.base32Decode(parts[1]), !key.isEmpty else {
            fail("--user-totp takes EMAIL:BASE32SECRET")
        }
        configuration.totpSecrets[parts[0]] = parts[1]
    case "--user-backup-codes":
        let parts = value(flag).split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { fail("--user-backup-codes takes EMAIL:CODE,CODE") }
        configuration.backupCodes[parts[0], default: []] += parts[1].split(separator: ",").map(String.init)
    case "--api-path":
        let path = value(flag)
        guard path.hasPrefix("/"), path.count > 1, !path.hasSuffix("/"), !path.hasPrefix("/__control__") else {
            fail("--api-path takes a path like /api/v1")
        }
        configuration.apiPath = path
    case "--environment":
        let id = value(flag)
        guard !id.isEmpty, !id.contains("/") else { fail("--environment takes an id") }
        if !configuration.environments.contains(id) { configuration.environments.append(id) }
    case "--organization":
        let parts = value(flag).split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty else { fail("--organization takes ID:NAME") }
        configuration.organizations.append((parts[0], parts[1]))
    case "--help", "-h":
        print(
            "usage: ostack-devserver [--port N] [--user EMAIL:PASSWORD:NAME]… [--api-key EMAIL:osk_…]… [--session-ttl S] [--update-age S] [--rotate-tokens] [--rotation-grace S] [--batch-cap N] [--latency-ms N] [--user-totp EMAIL:BASE32]… [--user-backup-codes EMAIL:CODE,CODE]… [--api-path PATH] [--environment ID]… [--organization ID:NAME]… [--conformance-objects] [--honour-idempotency-key] [--conditional-batch] [--assign-ids] [--microsecond-stamps]"
        )
        exit(0)
    default: fail("unknown flag \(flag)")
    }
}
if !customUsers.isEmpty { configuration.users = customUsers }
if !DevServerConfiguration.isLoopback(configuration.host) {
    fail("refusing to listen on \(configuration.host): only 127.0.0.1 is allowed")
}

do {
    let server = try await DevServer.start(configuration)
    // Unbuffered: the launcher reads this first line to learn the port.
    _ = "listening on http://127.0.0.1:\(server.port)\n".withCString { write(1, $0, strlen($0)) }
    try await server.wait()
} catch {
    fail("\(error)")
}
