// The plugin under the real engine, against a scripted fake `factrail`: what each hook sends,
// how every answer is applied, and that every failure falls back to Claude Code's own behaviour.
// Run: claude plugin test plugin

import { describe, expect, test } from 'claude-code/testing'

import { NOW, SID, SUMMARY, TURN_DONE, ok, sentTo, transcript, world } from './world.js'
import type { Reply } from './world.js'


describe('session.compact', () => {
  test('install: keep entries are the engine\'s own messages, built ones are rebuilt, the writes land', async ($, on) => {
    const w = world(on, { tokens: 190_000 })
    w.binary = () => ok({
      action: 'install',
      messages: [
        { keep: 0 },
        { keep: 1 },
        { role: 'user', text: '', toolUses: [], toolResults: [{ tool_use_id: 'toolu_1', text: '[factrail omitted 3 chars]' }] },
      ],
      reason: 'rules', log: 'factrail: kept 2/3 messages verbatim', toast: true,
      store: { taint: { tainted: true, count: 1, sample: ['x'], at: NOW }, last: 'factrail: kept 2/3 messages verbatim' },
    })
    const r = await $.session.compact({ trigger: 'manual', messages: transcript() } as never)

    const [sent] = sentTo(w, 'compact')
    expect(sent?.argv).toEqual(['factrail', 'hook', 'compact'])
    expect(sent?.timeoutMs).toBe(25_000)
    const req = sent?.request ?? {}
    expect(req['protocol']).toBe(1)
    // every option travels as Claude Code hands it over: unset ones as ''
    expect(req['config']['binary']).toBe('factrail')
    expect(req['config']['backend']).toBe('')
    expect(req['session']).toEqual({ id: SID, cwd: '/work/project', model: 'claude-fable-5-1', trigger: 'manual', agentId: null })
    expect(req['instructions']).toBe(null)
    expect(req['usage']).toEqual({ tokens: 190_000, window: 200_000 })
    expect(req['store']).toEqual({ enabled: null, taint: null })
    expect(req['now']).toBe(NOW)
    expect(req['messages'][1]).toEqual({ role: 'assistant', text: '', handle: 'h1', toolUses: [{ tool_use_id: 'toolu_1', tool: 'Bash', input: { command: 'ls' }, text: 'a\nb' }] })
    expect(req['messages'][2].toolResults).toEqual([{ tool_use_id: 'toolu_1', text: 'a\nb', isError: false }])

    expect(w.builtin).toEqual([])
    const out = (r as { messages: any[] }).messages
    expect(out.length).toBe(3)
    expect(out[0].handle).toBe('h0')
    expect(out[1].handle).toBe('h1')
    expect(out[2].handle).toBeUndefined()
    expect(out[2].toolResults[0].text).toBe('[factrail omitted 3 chars]')
    expect(w.store.get(`taint:${SID}`)).toEqual({ tainted: true, count: 1, sample: ['x'], at: NOW })
    expect(w.store.get('last')).toBe('factrail: kept 2/3 messages verbatim')
    expect(w.store.get(`baseline:${SID}`)).toEqual({ pending: true, at: NOW })
    expect(w.logs).toContain('factrail: kept 2/3 messages verbatim')
    expect(w.toasts.length).toBe(1)
  })

  test('the stored switch and taint travel in the request; options travel untouched', { options: { backend: ' TEV ', compactAtTokens: 90_000, compactionTimeoutMs: 2500 } }, async ($, on) => {
    const w = world(on)
    w.store.set('enabled', false)
    w.store.set(`taint:${SID}`, { tainted: true, at: 1 })
    w.binary = () => ok({ action: 'builtin', reason: 'switched-off', store: { taint: null, last: null } })
    await $.session.compact({ trigger: 'auto', messages: transcript() } as never)
    const req = sentTo(w, 'compact')[0]?.request ?? {}
    expect(req['store']).toEqual({ enabled: false, taint: { tainted: true, at: 1 } })
    expect(req['config']['backend']).toBe(' TEV ')
    expect(req['config']['compactAtTokens']).toBe(90_000)
    expect(sentTo(w, 'compact')[0]?.timeoutMs).toBe(12_500)
    expect(w.builtin).toEqual([{ trigger: 'auto' }])
  })

  test('builtin with instructions hands them to the built-in compaction', async ($, on) => {
    const w = world(on)
    w.binary = () => ok({ action: 'builtin', instructions: 'Keep the file list.', reason: 'tainted', log: 'factrail: built-in summary (tainted)', toast: true, store: { taint: null, last: 'x' } })
    const r = await $.session.compact({ trigger: 'manual', instructions: 'mine', messages: transcript() } as never)
    expect(sentTo(w, 'compact')[0]?.request['instructions']).toBe('mine')
    expect(w.builtin).toEqual([{ trigger: 'manual', instructions: 'Keep the file list.' }])
    expect((r as { messages: any[] }).messages[0].text).toBe(SUMMARY.text)
    expect(w.toasts).toEqual(['factrail: built-in summary (tainted)'])
  })

  test('skip installs nothing and sets no baseline; a baseline the answer names is written', async ($, on) => {
    const w = world(on)
    w.binary = () => ok({ action: 'skip', reason: 'declined', store: { taint: null, last: 'held', baseline: { tokens: 5, at: NOW } } })
    const r = await $.session.compact({ trigger: 'plugin', messages: transcript() } as never)
    expect((r as { skip?: string }).skip).toBe('declined')
    expect(w.builtin).toEqual([])
    expect(w.store.get(`baseline:${SID}`)).toEqual({ tokens: 5, at: NOW })
  })

  test('a subagent\'s compaction carries its agentId and leaves the main baseline alone', async ($, on) => {
    const w = world(on)
    w.binary = () => ok({ action: 'builtin', reason: 'subagent', store: { taint: null, last: null } })
    await $.session.compact({ trigger: 'auto', agentId: 'agent-1', messages: transcript() } as never)
    expect(sentTo(w, 'compact')[0]?.request['session'].agentId).toBe('agent-1')
    expect(w.builtin).toEqual([{ trigger: 'auto' }])
    expect(w.store.get(`baseline:${SID}`)).toBeUndefined()
  })

  const malformed: [string, unknown][] = [
    ['a keep index out of range', [{ keep: 0 }, { keep: 3 }]],
    ['a keep index used twice', [{ keep: 1 }, { keep: 1 }]],
    ['a negative keep index', [{ keep: -1 }]],
    ['a fractional keep index', [{ keep: 0.5 }]],
    ['a built message of another role', [{ keep: 0 }, { role: 'system', text: 'x', toolUses: [] }]],
    ['a built message without toolUses', [{ role: 'user', text: 'x' }]],
    ['a built message whose text is no string', [{ role: 'user', text: 7, toolUses: [] }]],
    ['a built message carrying a handle', [{ role: 'user', text: 'x', toolUses: [], handle: 'h1' }]],
    ['a tool use without its input', [{ role: 'assistant', text: '', toolUses: [{ tool_use_id: 't', tool: 'Bash' }] }]],
    ['a result whose isError is no boolean', [{ role: 'user', text: '', toolUses: [], toolResults: [{ tool_use_id: 't', text: '', isError: 'no' }] }]],
    ['a result without text', [{ role: 'user', text: '', toolUses: [], toolResults: [{ tool_use_id: 't' }] }]],
    ['an entry that is no object', [{ keep: 0 }, 'x']],
    ['a good list spoiled by its last entry', [{ keep: 0 }, { keep: 1 }, { keep: 2 }, { keep: 9 }]],
    ['an empty list', []],
    ['no list at all', undefined],
  ]
  for (const [name, messages] of malformed) {
    test(`a malformed install (${name}) is checked whole and falls back`, async ($, on) => {
      const w = world(on)
      w.binary = () => ok({ action: 'install', messages, reason: 'ok', store: { taint: null, last: null } })
      const r = await $.session.compact({ trigger: 'manual', messages: transcript() } as never)
      expect(w.builtin).toEqual([{ trigger: 'manual' }])
      expect((r as { messages: any[] }).messages[0].text).toBe(SUMMARY.text)
      expect(w.logs.some((l) => l.includes('malformed answer'))).toBe(true)
      expect(String(w.store.get('last'))).toContain('factrail: built-in compaction')
    })
  }

  const failures: [string, Reply, string][] = [
    ['a non-zero exit', { exitCode: 3, stdout: '', stderr: 'Traceback (most recent call last):\nboom\n' }, 'factrail exited 3: boom'],
    ['a non-zero exit with a JSON answer', { exitCode: 1, stdout: JSON.stringify(ok({ action: 'builtin' })) }, 'exited 1'],
    ['a spawn failure', new Error('spawn factrail ENOENT'), 'could not run factrail'],
    ['a timeout', new Error('the child ran past 25000 ms and was killed'), 'could not run factrail'],
    ['output that is not JSON', { stdout: 'not json' }, 'unparsable answer'],
    ['empty output', { stdout: '' }, 'unparsable answer'],
    ['a JSON array', { stdout: '[]' }, 'the answer is not a JSON object'],
    ['ok: false', { protocol: 1, ok: false, error: 'request is not JSON' }, 'refused: request is not JSON'],
    ['ok missing', { protocol: 1, action: 'builtin' }, 'refused: no error given'],
    ['another protocol', { protocol: 2, ok: true, action: 'install', messages: [{ keep: 0 }] }, 'protocol mismatch'],
    ['no protocol', { ok: true, action: 'builtin' }, 'protocol mismatch'],
    ['an unknown action', ok({ action: 'summarise' }), 'unknown action "summarise"'],
    ['builtin instructions that are no string', ok({ action: 'builtin', instructions: 7 }), 'instructions that are not a string'],
  ]
  for (const [name, reply, why] of failures) {
    test(`${name} falls back to the built-in compaction`, async ($, on) => {
      const w = world(on)
      w.binary = () => reply
      const r = await $.session.compact({ trigger: 'manual', messages: transcript() } as never)
      expect(w.builtin).toEqual([{ trigger: 'manual' }])
      expect((r as { messages: any[] }).messages[0].text).toBe(SUMMARY.text)
      expect(w.logs.some((l) => l.startsWith('factrail: built-in compaction (') && l.includes(why))).toBe(true)
      // the built-in compaction stood, so the hysteresis baseline resets as for any other
      expect(w.store.get(`baseline:${SID}`)).toEqual({ pending: true, at: NOW })
    })
  }
})

describe('turn.complete', () => {
  test('the request carries usage, tools and the stored state; compact runs a plugin compaction', async ($, on) => {
    const w = world(on, { tokens: 185_000, rateLimits: 2 })
    w.messages = [{ role: 'assistant', text: '', toolUses: [
      { tool_use_id: 'a', tool: 'Skill', input: { skill: 'email-search' } },
      { tool_use_id: 'b', tool: 'Skill', input: { name: 'pdf' } },
      { tool_use_id: 'c', tool: 'mcp__x__y', input: {} },
    ] }]
    w.store.set(`baseline:${SID}`, { tokens: 100_000, at: NOW - 1 })
    w.binary = (hook) => hook === 'turn'
      ? ok({ compact: true, reason: 'soft-line', baseline: null, taint: { tainted: true, at: NOW }, nudge: null, log: 'factrail: due at 185k' })
      : ok({ action: 'builtin', reason: 'below-gate', store: { taint: null, last: 'x' } })
    await $.turn.complete(TURN_DONE as never)

    const req = sentTo(w, 'turn')[0]?.request ?? {}
    expect(sentTo(w, 'turn')[0]?.timeoutMs).toBe(10_000)
    expect(req['usage']).toEqual({ tokens: 185_000, percent: 93, window: 200_000 })
    expect(req['baseline']).toEqual({ tokens: 100_000, at: NOW - 1 })
    expect(req['rateLimits']).toBe(2)
    expect(req['hasApiKey']).toBe(false)
    expect(req['event']).toEqual({ reason: 'answer', agentId: null })
    expect(req['tools']).toEqual([{ tool: 'Skill', skill: 'email-search' }, { tool: 'Skill', skill: 'pdf' }, { tool: 'mcp__x__y', skill: null }])
    expect(req['store']).toEqual({ taint: null, enabled: null })
    expect(req['now']).toBe(NOW)
    // the compaction it started says why
    expect(sentTo(w, 'compact')[0]?.request['session']).toEqual({ id: SID, cwd: '/work/project', model: 'claude-fable-5-1', trigger: 'plugin', agentId: null, cause: 'threshold' })
    expect(w.builtin.length).toBe(1) // the kit hands a plugin's own compaction no trigger
    expect(w.store.get(`taint:${SID}`)).toEqual({ tainted: true, at: NOW })
    expect(w.store.get(`baseline:${SID}`)).toEqual({ pending: true, at: NOW })
    expect(w.logs).toContain('factrail: due at 185k')
  })

  test('a baseline the answer names is written; nothing is compacted', async ($, on) => {
    const w = world(on, { tokens: 120_000 })
    w.binary = () => ok({ compact: false, reason: 'below-soft-line', baseline: { tokens: 120_000, at: NOW }, taint: null, nudge: null, log: null })
    await $.turn.complete(TURN_DONE as never)
    expect(w.store.get(`baseline:${SID}`)).toEqual({ tokens: 120_000, at: NOW })
    expect(sentTo(w, 'compact')).toEqual([])
  })

  test('a subagent\'s turn asks nothing', async ($, on) => {
    const w = world(on)
    await $.turn.complete({ ...TURN_DONE, agentId: 'a1' } as never)
    expect(w.sent).toEqual([])
  })

  for (const [name, reply] of [
    ['a failed turn check', { exitCode: 1, stderr: 'boom' }],
    ['a refusal', { protocol: 1, ok: false, error: 'nope' }],
    ['output that is not JSON', { stdout: '<html>' }],
  ] as [string, Reply][]) {
    test(`${name} changes nothing`, async ($, on) => {
      const w = world(on)
      w.binary = () => reply
      const r = await $.turn.complete(TURN_DONE as never)
      expect(r.text).toBe('')
      expect(w.store.size).toBe(0)
      expect(sentTo(w, 'compact')).toEqual([])
      expect(w.logs.some((l) => l.startsWith('factrail: turn check failed'))).toBe(true)
    })
  }

  test('the nudge fires once the session stays idle, and starts no compaction of its own', async ($, on) => {
    const w = world(on, { tokens: 160_000 })
    w.binary = () => ok({ compact: false, reason: 'hysteresis', baseline: null, taint: null, nudge: { delayMs: 150_000, mode: 'compact', tokens: 160_000 }, log: null })
    await $.turn.complete(TURN_DONE as never)
    await w.clock.advance(149_999)
    expect(w.toasts).toEqual([])
    await w.clock.advance(1)
    expect(w.toasts.some((t) => t.includes('160k tokens') && t.includes('/compact now'))).toBe(true)
    expect(sentTo(w, 'compact')).toEqual([])
    expect(w.builtin).toEqual([])
  })

  test('a compaction that does not stand arms the nudge; a new turn cancels it', async ($, on) => {
    const w = world(on, { tokens: 160_000 })
    w.binary = (hook) => hook === 'turn'
      ? ok({ compact: true, reason: 'soft-line', baseline: null, taint: null, nudge: { delayMs: 1_000, mode: 'compact', tokens: 160_000 }, log: null })
      : ok({ action: 'skip', reason: 'declined', store: { taint: null, last: null } })
    await $.turn.complete(TURN_DONE as never)
    expect(sentTo(w, 'compact').length).toBe(1)
    await $.turn.start({ text: 'next', turnId: 'turn-2' } as never)
    await w.clock.advance(5_000)
    expect(sentTo(w, 'compact').length).toBe(1)
  })

  // As Claude Code 2.1.332 in print mode does ("not available in a headless (-p / SDK) session
  // yet"); under the kit the refusal surfaces as its bottom hook's error instead.
  test('a compaction the engine refuses to start is logged as such, and arms the nudge', async ($, on) => {
    const w = world(on, { tokens: 190_000 })
    w.refuseCompact = '$.session.compact: not available in a headless (-p / SDK) session yet'
    w.messages = transcript()
    w.binary = (hook) => hook === 'turn'
      ? ok({ compact: true, reason: 'danger-line', baseline: null, taint: null, nudge: { delayMs: 10, mode: 'notify', tokens: 190_000 }, log: null })
      : ok({ action: 'builtin', reason: 'below-gate', store: { taint: null, last: null } })
    await $.turn.complete(TURN_DONE as never)
    expect(w.logs.some((l) => l.startsWith('factrail: threshold compaction not started ('))).toBe(true)
    expect(w.logs.some((l) => l.startsWith('factrail: turn check failed'))).toBe(false)
    await w.clock.advance(10)
    expect(w.toasts.some((t) => t.includes('/compact now'))).toBe(true)
  })

  test('a notify nudge toasts; a malformed nudge is never armed', async ($, on) => {
    const w = world(on, { tokens: 160_000 })
    let nudge: unknown = { delayMs: 10, mode: 'notify', tokens: 160_000 }
    w.binary = () => ok({ compact: false, reason: 'soft-line', baseline: null, taint: null, nudge, log: null })
    await $.turn.complete(TURN_DONE as never)
    await w.clock.advance(10)
    expect(w.toasts.some((t) => t.includes('/compact now'))).toBe(true)
    expect(sentTo(w, 'compact')).toEqual([])
    nudge = { delayMs: -5, mode: 'compact' }
    const before = w.toasts.length
    await $.turn.complete(TURN_DONE as never)
    await w.clock.advance(100_000)
    expect(w.toasts.length).toBe(before)
  })
})

describe('tool.call and skill.prompt', () => {
  test('a fenced call writes the record the binary returns, once, and the call runs', async ($, on) => {
    const w = world(on)
    w.binary = (_hook, req) => ok({ taint: req['store'].taint === null ? { tainted: true, count: 1, sample: [req['tool']], at: NOW } : null })
    const r = await $.tool.call({ tool: 'mcp__email-gateway__ask_email', input: { q: 'x' }, tool_use_id: 'u1' } as never)
    expect((r as { result?: unknown }).result).toBe('ran')
    const req = sentTo(w, 'taint')[0]?.request ?? {}
    expect({ ...req, config: undefined }).toEqual({ protocol: 1, config: undefined, tool: 'mcp__email-gateway__ask_email', skill: null, store: { taint: null }, now: NOW })
    expect(sentTo(w, 'taint')[0]?.timeoutMs).toBe(5_000)
    expect(w.store.get(`taint:${SID}`)).toEqual({ tainted: true, count: 1, sample: ['mcp__email-gateway__ask_email'], at: NOW })
  })

  test('a Skill call sends its skill; a skill prompt sends its plugin-qualified name', async ($, on) => {
    const w = world(on)
    w.binary = () => ok({ taint: null })
    await $.tool.call({ tool: 'Skill', input: { skill: 'email-search' }, tool_use_id: 'u2' } as never)
    await $.skill.prompt({ skill: 'email-search', text: 'go', pluginName: 'agentbox' } as never)
    expect(sentTo(w, 'taint').map((s) => [s.request['tool'], s.request['skill']])).toEqual([['Skill', 'email-search'], [null, 'agentbox:email-search']])
  })

  test('a failing taint check never blocks the call', async ($, on) => {
    const w = world(on)
    w.binary = () => new Error('spawn factrail ENOENT')
    const r = await $.tool.call({ tool: 'Bash', input: { command: 'ls' }, tool_use_id: 'u3' } as never)
    expect((r as { result?: unknown }).result).toBe('ran')
    expect(w.logs.some((l) => l.startsWith('factrail: taint check failed'))).toBe(true)
  })
})

describe('/factrail and session.start', () => {
  test('status shows the binary\'s text and stores the switch it returns', async ($, on) => {
    const w = world(on, { tokens: 50_000 })
    w.store.set('last', 'factrail: kept 1/2')
    w.binary = () => ok({ text: 'factrail 0.1.0: OFF (saved)', store: { enabled: false } })
    const r = await $.command.run({ command: 'factrail', args: 'off' } as never)
    expect(r.text).toBe('factrail 0.1.0: OFF (saved)')
    expect(w.store.get('enabled')).toBe(false)
    const req = sentTo(w, 'status')[0]?.request ?? {}
    expect(req['args']).toBe('off')
    expect(req['store']).toEqual({ enabled: null, taint: null, last: 'factrail: kept 1/2' })
    expect(req['usage']).toEqual({ tokens: 50_000, percent: 25, window: 200_000 })
  })

  test('a failed status says the built-in compaction runs until the binary answers', async ($, on) => {
    const w = world(on)
    w.binary = () => ({ exitCode: 127, stderr: 'factrail: not found' })
    const r = await $.command.run({ command: 'factrail', args: '' } as never)
    expect(r.text).toContain('the binary failed (factrail exited 127: factrail: not found)')
    expect(w.store.has('enabled')).toBe(false)
  })

  test('session start prunes stale taint and baseline records, and only those', async ($, on) => {
    const w = world(on)
    const day = 24 * 3600 * 1000
    w.store.set('taint:old', { tainted: true, at: NOW - 31 * day })
    w.store.set('taint:new', { tainted: true, at: NOW - day })
    w.store.set('baseline:junk', { pending: true })
    w.store.set('baseline:text', { tokens: 1, at: String(NOW - day) })
    w.store.set('enabled', true)
    w.store.set('last', 'x')
    await $.session.start({ cwd: '/work/project' } as never)
    expect([...w.store.keys()].sort()).toEqual(['baseline:text', 'enabled', 'last', 'taint:new'])
  })
})
