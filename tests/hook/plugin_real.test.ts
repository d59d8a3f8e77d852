// The plugin's hooks under Claude Code's testing kit, answered by the real `factrail hook` of
// this checkout. A test file runs sandboxed (no process, file system or network), so this runs
// by record and replay: tests/hook/test_plugin_real_binary.py copies plugin/ to a temporary
// folder, puts this file there as tests/real.test.ts beside a generated tests/replies.ts, and
// runs `claude plugin test` until every request the hooks send has the reply the real binary
// gave to exactly that request (the hook, and stdin by its length and two 53-bit hashes: a
// module the kit loads is at most 1 MiB, too small for the transcripts themselves). A request
// without one is printed as one `FACTRAIL-REQUEST {json}` line, with its key, for the driver,
// and fails as a missing binary would.
// Each test names its own session, so the binary's state for one never meets another's.

import { describe, expect, test } from 'claude-code/testing'
import type { SessionMessage } from 'claude-code'

import { REPLIES } from './replies.js'
import { NOW, SUMMARY, TURN_DONE, sentTo, transcript, world } from './world.js'
import type { Binary, Raw, World } from './world.js'

// The kit's sandbox has a console the engine's types do not declare.
declare const console: { log: (line: string) => void }

const EMAIL = 'mcp__email-gateway__search'
const replies = new Map<string, Raw>(REPLIES)

/** cyrb53: a 53-bit hash of a string's UTF-16 code units. */
function hash(text: string, seed: number): number {
  let h1 = 0xdeadbeef ^ seed
  let h2 = 0x41c6ce57 ^ seed
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return 4294967296 * (2097151 & h2) + (h1 >>> 0)
}

const keyOf = (hook: string, stdin: string): string => `${hook}:${stdin.length}:${hash(stdin, 0)}:${hash(stdin, 1)}`

/** The recorded reply of the real binary to this very request, or a printed request. */
const replay = (sid: string): Binary => (hook, _request, stdin) => {
  const key = keyOf(hook, stdin)
  const reply = replies.get(key)
  if (reply === undefined) console.log(`FACTRAIL-REQUEST ${JSON.stringify({ sid, key, hook, stdin })}`)
  return reply
}

function real(on: Parameters<typeof world>[0], sid: string, init: Parameters<typeof world>[1] = {}): World {
  const w = world(on, { ...init, sid })
  w.binary = replay(sid)
  return w
}

const log = (step: number): string => {
  const lines = Array.from({ length: 160 }, (_, j) => `tests/test_mod${step}.py::test_case_${j} PASSED [${j}%]`)
  lines.splice(80, 0, `FAILED tests/test_mod${step}.py::test_edge - AssertionError: id 7f3a${String(step).padStart(4, '0')}`)
  return lines.join('\n')
}
const source = (step: number): string =>
  Array.from({ length: 120 }, (_, j) => `def helper_${step}_${j}(value: int) -> int:\n    return value * ${j} + ${step}`).join('\n')

/** A coding session long enough to compact, as the engine hands it: handles and records. */
function session(steps = 24, first?: { tool: string; input: Record<string, unknown>; text: string }): SessionMessage[] {
  const out: SessionMessage[] = [{ role: 'user', text: 'Fix the failing edge test in the project.', toolUses: [] }]
  for (let i = 0; i < steps; i++) {
    const id = `toolu_${String(i).padStart(3, '0')}`
    const read = i % 2 === 1
    const tool = first && i === 0 ? first.tool : read ? 'Read' : 'Bash'
    const input = first && i === 0 ? first.input : read ? { file_path: `/w/src/m${i}.py` } : { command: `pytest -k mod${i}` }
    const text = first && i === 0 ? first.text : read ? source(i) : log(i)
    out.push({ role: 'assistant', text: `Step ${i}.`, toolUses: [{ tool_use_id: id, tool, input, text, result: { stdout: text } }] })
    out.push({ role: 'user', text: '', toolUses: [], toolResults: [{ tool_use_id: id, text, isError: false, result: { stdout: text } }] })
  }
  out.push({ role: 'assistant', text: 'The edge test fails on id 7f3a0000.', toolUses: [] })
  out.push({ role: 'user', text: 'Go on.', toolUses: [] })
  return out.map((m, n) => ({ ...m, handle: `h${n}` }))
}

/** Nothing the user or the agent wrote changed: roles, texts and calls, message for message. */
function sameWriting(before: readonly SessionMessage[], after: readonly SessionMessage[]): void {
  expect(after.length).toBe(before.length)
  for (const [k, m] of after.entries()) {
    const was = before[k] as SessionMessage
    expect(m.role).toBe(was.role)
    expect(m.text).toBe(was.text)
    expect(m.toolUses.map((u) => [u.tool_use_id, u.tool, u.input])).toEqual(was.toolUses.map((u) => [u.tool_use_id, u.tool, u.input]))
  }
}

describe('session.compact against the real binary', () => {
  test('a long session: install, the engine\'s own messages kept, old results reduced and saved', async ($, on) => {
    const w = real(on, 'real-install', { tokens: 70_000 })
    const before = session()
    const r = await $.session.compact({ trigger: 'manual', messages: before } as never)
    expect(w.sent.length).toBe(1)
    expect(w.builtin).toEqual([])
    const after = (r as { messages: SessionMessage[] }).messages
    sameWriting(before, after)
    // a kept message is the engine's own (its handle, in its place); a rebuilt one has none
    const kept = after.filter((m) => m.handle !== undefined)
    const rebuilt = after.filter((m) => m.handle === undefined)
    expect(kept.length).toBeGreaterThan(0)
    expect(rebuilt.length).toBeGreaterThan(0)
    expect(after.every((m, k) => m.handle === undefined || m.handle === before[k]?.handle)).toBe(true)
    // the first message and the pinned tail are the engine's own
    expect(after[0]?.handle).toBe('h0')
    expect(after[after.length - 1]?.handle).toBe(before[before.length - 1]?.handle)
    const notes = rebuilt.flatMap((m) => m.toolResults ?? []).map((t) => t.text)
    expect(notes.filter((t) => t.includes('[factrail omitted')).length).toBeGreaterThanOrEqual(10)
    expect(notes.some((t) => t.includes('factrail outputs get '))).toBe(true)
    expect(notes.some((t) => t.includes('FAILED tests/test_mod0.py::test_edge'))).toBe(true)
    const last = String(w.store.get('last'))
    expect(last).toStartWith('factrail: kept ')
    expect(w.logs).toContain(last)
    expect(w.toasts.length).toBe(1)
    expect(w.store.get('baseline:real-install')).toEqual({ pending: true, at: NOW })
  })

  test('a transcript with nothing to reduce hands over to the built-in summary', async ($, on) => {
    const w = real(on, 'real-below-gate')
    const r = await $.session.compact({ trigger: 'manual', messages: transcript() } as never)
    expect(w.sent.length).toBe(1)
    expect(w.builtin).toEqual([{ trigger: 'manual' }])
    expect((r as { messages: SessionMessage[] }).messages[0]?.text).toBe(SUMMARY.text)
    expect(w.logs.some((l) => l.startsWith('factrail: built-in compaction ('))).toBe(false)
  })

  test('a subagent\'s compaction is the built-in one, and leaves the main baseline alone', async ($, on) => {
    const w = real(on, 'real-subagent', { tokens: 70_000 })
    await $.session.compact({ trigger: 'auto', agentId: 'agent-1', messages: session() } as never)
    expect(w.builtin).toEqual([{ trigger: 'auto' }])
    expect(w.store.get('baseline:real-subagent')).toBeUndefined()
  })

  test('/factrail off answers, stores the switch, and the next compaction is the built-in one', async ($, on) => {
    const w = real(on, 'real-switch', { tokens: 70_000 })
    const off = await $.command.run({ command: 'factrail', args: 'off' } as never)
    expect(off.text).toContain('factrail')
    expect(off.text).not.toContain('the binary failed')
    expect(w.store.get('enabled')).toBe(false)
    await $.session.compact({ trigger: 'manual', messages: session() } as never)
    expect(sentTo(w, 'compact')[0]?.request['store'].enabled).toBe(false)
    expect(w.builtin).toEqual([{ trigger: 'manual' }])
    const on_ = await $.command.run({ command: 'factrail', args: 'on' } as never)
    expect(on_.text).not.toContain('the binary failed')
    expect(w.store.get('enabled')).toBe(true)
    const typo = await $.command.run({ command: 'factrail', args: 'sideways' } as never)
    expect(typo.text).toContain('usage: /factrail on | off | status')
  })

  test('a fenced call taints the session once; with fallback summary, a remote judge never sees it', { options: { backend: 'systemone', baseUrl: 'http://127.0.0.1:9/v1/systemone', fallback: 'summary' } }, async ($, on) => {
    const w = real(on, 'real-fenced', { tokens: 70_000 })
    await $.tool.call({ tool: EMAIL, input: { query: 'invoice' }, tool_use_id: 'u1' } as never)
    const record = w.store.get('taint:real-fenced') as Record<string, unknown>
    expect(record['tainted']).toBe(true)
    expect(record['at']).toBe(NOW)
    await $.tool.call({ tool: 'Bash', input: { command: 'ls' }, tool_use_id: 'u2' } as never)
    expect(w.store.get('taint:real-fenced')).toEqual(record)
    const messages = session(24, { tool: EMAIL, input: { query: 'invoice' }, text: 'From: a@b.test\nSubject: invoice' })
    await $.session.compact({ trigger: 'manual', messages } as never)
    expect(sentTo(w, 'compact')[0]?.request['store'].taint).toEqual(record)
    // the driver gives the binary a judge key, so the fence (not a missing key) decides
    expect(w.builtin).toEqual([{ trigger: 'manual' }])
    expect(String(w.store.get('last'))).toContain('tainted')
    expect(String(w.store.get('last'))).not.toContain('no-key')
  })

  test('a fenced skill taints the session: as a Skill call and as a slash command', async ($, on) => {
    const w = real(on, 'real-skill')
    await $.tool.call({ tool: 'Skill', input: { skill: 'pdf' }, tool_use_id: 'u1' } as never)
    expect(w.store.has('taint:real-skill')).toBe(false)
    await $.skill.prompt({ skill: 'email-search', text: 'go', pluginName: 'agentbox' } as never)
    expect((w.store.get('taint:real-skill') as Record<string, unknown>)['tainted']).toBe(true)
    const w2 = sentTo(w, 'taint').map((s) => [s.request['tool'], s.request['skill']])
    expect(w2).toEqual([['Skill', 'pdf'], [null, 'agentbox:email-search']])
  })
})

describe('turn.complete against the real binary', () => {
  test('below the soft line nothing is compacted', async ($, on) => {
    const w = real(on, 'real-quiet', { tokens: 20_000 })
    w.messages = transcript()
    await $.turn.complete(TURN_DONE as never)
    expect(sentTo(w, 'turn').length).toBe(1)
    expect(sentTo(w, 'compact')).toEqual([])
    expect(w.logs.some((l) => l.startsWith('factrail: turn check failed'))).toBe(false)
  })

  test('past the danger line the turn starts a compaction of the plugin\'s own, which installs', { options: { compactAtTokens: 40_000 } }, async ($, on) => {
    const w = real(on, 'real-due', { tokens: 150_000 })
    w.messages = session()
    await $.turn.complete(TURN_DONE as never)
    expect(sentTo(w, 'turn').length).toBe(1)
    const [compact] = sentTo(w, 'compact')
    expect(compact?.request['session']).toEqual({ id: 'real-due', cwd: '/work/project', model: 'claude-fable-5-1', trigger: 'plugin', agentId: null, cause: 'threshold' })
    expect(w.logs.some((l) => l.startsWith('factrail: turn check failed'))).toBe(false)
    expect(String(w.store.get('last'))).toStartWith('factrail: kept ')
    expect(w.store.get('baseline:real-due')).toEqual({ pending: true, at: NOW })
  })

  test('after a compaction stood, the next turn turns the pending baseline into this turn\'s size', async ($, on) => {
    const w = real(on, 'real-baseline', { tokens: 30_000 })
    w.store.set('baseline:real-baseline', { pending: true, at: NOW - 1 })
    w.messages = transcript()
    await $.turn.complete(TURN_DONE as never)
    expect(w.store.get('baseline:real-baseline')).toEqual({ tokens: 30_000, at: NOW })
  })

  test('a due turn the compaction declines arms the cache-warm nudge, which only toasts', { options: { cacheWarmFloorTokens: 1000, compactAtTokens: 100_000 } }, async ($, on) => {
    const w = real(on, 'real-nudge', { tokens: 95_000, rateLimits: 2 })
    w.messages = transcript()
    await $.turn.complete(TURN_DONE as never)
    // due at the soft line; the plugin's own compaction of a transcript with nothing to gain
    // is declined, so the nudge is armed (an hour's cache on a subscription, less the margin)
    expect(sentTo(w, 'compact').length).toBe(1)
    expect(w.logs.some((l) => l.includes('compaction skipped'))).toBe(true)
    expect(w.toasts).toEqual([])
    await w.clock.advance(3300 * 1000 - 1)
    expect(w.toasts).toEqual([])
    await w.clock.advance(1)
    expect(w.toasts.some((t) => t.includes('95k tokens') && t.includes('/compact now'))).toBe(true)
    expect(sentTo(w, 'compact').length).toBe(1)
  })
})
