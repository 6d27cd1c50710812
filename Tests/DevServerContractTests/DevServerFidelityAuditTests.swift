import CurlKit
import FoundationEssentials
import OStackTestSupport
import Testing

/// Differences from the real ObjectStack server found by the fidelity audit of 2026-11-29
/// (`objectstack-ai/objectstack` at `5337ef16`), reproduced since (docs/decisions/0006). Each test
/// states the real behaviour; a failure is a place where the dev server answers differently from
/// production.
@Suite struct DevServerFidelityAuditTests {
    let harness: DevServerHarness

    init() throws {
        harness = try DevServerHarness()
    }

    /// `packages/drivers/driver-sql/src/sql-driver.ts` `orderKeysFor`: the tie-breaker (`id`) is
    /// appended "in the LAST requested key's direction", so `sort=-amount` orders equal amounts by
    /// `id DESC`. The dev server (and the client's local store, `LocalStore+Query.swift`) broke ties
    /// by `id` ascending whatever the direction.
    @Test func aDescendingSortBreaksTiesByIdDescending() throws {
        let token = try harness.signIn()
        for id in ["tie_a", "tie_b", "tie_c"] {
            let created = try harness.call(
                .post, "/api/v1/data/task", token: token, body: #"{"id":"\#(id)","title":"t","amount":5}"#)
            try #require(created.status == 201)
        }
        let list = try harness.call(.get, "/api/v1/data/task?sort=-amount&top=10", token: token)
        let ids = (list.json["records"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
        #expect(ids == ["tie_c", "tie_b", "tie_a"])
    }

    /// `objectql/src/engine.ts` (the delete path's relation walk): a `lookup` without a
    /// `deleteBehavior` is `set_null`, so deleting a project clears `project_id` on its tasks (a
    /// write the client sees only by pulling them; `restrict`, or `required` on the lookup, refuses the
    /// delete with 409 `DELETE_RESTRICTED`). The dev server kept the dangling reference.
    @Test func deletingAReferencedRecordClearsTheLookup() throws {
        let token = try harness.signIn()
        let project = try harness.call(.post, "/api/v1/data/project", token: token, body: #"{"id":"prj_x","name":"P"}"#)
        try #require(project.status == 201)
        let task = try harness.call(
            .post, "/api/v1/data/task", token: token, body: #"{"id":"tsk_x","title":"t","project_id":"prj_x"}"#)
        try #require(task.status == 201)
        let deleted = try harness.call(.delete, "/api/v1/data/project/prj_x", token: token)
        #expect(deleted.status == 200)
        let read = try harness.call(.get, "/api/v1/data/task/tsk_x", token: token)
        let record = read.json["record"] as? [String: Any]
        #expect(record != nil && (record?["project_id"] == nil || record?["project_id"] is NSNullLite))
    }

    /// `restrict` (`note.task_id`): the delete is refused, 409 `DELETE_RESTRICTED`, and nothing changes;
    /// in `deleteMany` the row carries the declared status.
    @Test func aRestrictedDeleteIsRefusedAndChangesNothing() throws {
        let token = try harness.signIn()
        for body in [#"{"id":"tsk_r","title":"t"}"#, #"{"id":"tsk_s","title":"s"}"#] {
            try #require(try harness.call(.post, "/api/v1/data/task", token: token, body: body).status == 201)
        }
        let note = try harness.call(
            .post, "/api/v1/data/note", token: token, body: #"{"id":"nte_r","title":"n","task_id":"tsk_r"}"#)
        try #require(note.status == 201)
        let single = try harness.call(.delete, "/api/v1/data/task/tsk_r", token: token)
        #expect(single.status == 409 && single.json["code"] as? String == "DELETE_RESTRICTED")
        let batch = try harness.call(
            .post, "/api/v1/data/task/deleteMany", token: token,
            body: #"{"ids":["tsk_r","tsk_s"],"options":{"continueOnError":true}}"#)
        let rows = batch.json["results"] as? [[String: Any]] ?? []
        let error = (rows.first?["errors"] as? [[String: Any]])?.first
        #expect(error?["code"] as? String == "DELETE_RESTRICTED", "\(batch.json)")
        #expect((error?["httpStatus"] as? Double) == 409 || (error?["httpStatus"] as? Int) == 409, "\(batch.json)")
        #expect(rows.last?["success"] as? Bool == true)
        #expect(try harness.call(.get, "/api/v1/data/task/tsk_r", token: token).status == 200)
        #expect(try harness.call(.get, "/api/v1/data/note/nte_r", token: token).status == 200)
    }
}
