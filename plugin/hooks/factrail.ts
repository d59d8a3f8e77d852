// The factrail plugin's hooks: a shim over `factrail hook` (protocol v1). Every decision is the
// binary's; this module runs it once per hook through `$.process.run`, applies its answer, and
// falls back to Claude Code's own behaviour on any failure. What stays here is what only the
// engine's side can do: the store writes the answers ask for, the `/factrail` command, the
// turn counter and the cache-warm timer (with the guards that keep a timer and a turn, or two
// turn ends, from compacting twice), and pruning this plugin's own store.
//
// `$` is only ever spelled `$.noun.event(...)` (the engine checks it), so the helpers below
// take an `Io` of closures each hook builds over its own `$`.

import type { PluginOptions, Register, SessionCompactInput, SessionCompactResult, SessionMessage, Timer } from 'claude-code'

import {
  TIMEOUTS,
  ask,
  baselineKey,
  binaryOf,
  compactTimeoutMs,
  expiredKeys,
  held,
  lastLine,
  readCompaction,
  readStatus,
  readTurn,
  skillOf,
  taintKey,
  toolRefs,
  usageOf,
  wireMessage,
} from './protocol.js'
import type { Nudge, Run } from './protocol.js'

const COMMAND = 'factrail'
const ENABLED = 'enabled'
const LAST = 'last'
const TOAST_MS = 12_000
const NUDGE_TOAST_MS = 60_000

/** What a helper may do, as closures a hook builds over its own `$`. */
type Io = {
  run: Run
  get: (key: string) => Promise<unknown>
  set: (key: string, value: unknown) => Promise<void>
  log: (text: string) => void
  now: () => Promise<number>
  session: () => Promise<string>
}

const why = (error: unknown): string => lastLine(error instanceof Error ? error.message : String(error))
/** The session's model as the host names it (it prices a compaction), or null. */
const named = (model: unknown): string | null => (typeof model === 'string' && model !== '' ? model : null)

/** `factrail hook taint` for one call or skill; never throws, never blocks the call. */
async function markTaint(io: Io, options: PluginOptions, tool: string | null, skill: string | null): Promise<void> {
  try {
    const session = await io.session()
    const request = { protocol: 1, config: options, tool, skill, store: { taint: held(await io.get(taintKey(session))) }, now: await io.now() }
    const reply = await ask(io.run, binaryOf(options), 'taint', request, TIMEOUTS.taint)
    if (!reply.ok) { io.log(`factrail: taint check failed (${reply.why})`); return }
    const record = reply.body['taint']
    if (record !== undefined && record !== null) await io.set(taintKey(session), record)
  } catch (error) {
    io.log(`factrail: taint check failed (${why(error)})`)
  }
}

export const register: Register = (on, options) => {
  const binary = binaryOf(options)
  // `compacting`: a compaction this plugin started is in flight; `evaluating`: a turn end is
  // asking the binary (claimed before any await). `cause` tells `compact` which of this
  // plugin's reasons started the compaction it is asked about.
  const state = { compacting: false, evaluating: false, turnRunning: false, generation: 0, cause: 'threshold' }
  let nudge: Timer | undefined
  const cancelNudge = (): void => { nudge?.cancel(); nudge = undefined }

  on('session.start', async ($, e, next) => {
    try {
      await $.command.register({ name: COMMAND, description: 'factrail compaction: on | off | status', argumentHint: 'on|off|status' })
    } catch { /* without the command the hooks still compact; only the switch is lost */ }
    try {
      const now = await $.clock.now()
      const entries: (readonly [string, unknown])[] = []
      for (const key of await $.store.keys()) {
        if (/^(taint|baseline):/.test(key)) entries.push([key, await $.store.get(key)] as const)
      }
      for (const key of expiredKeys(entries, now)) await $.store.delete(key)
    } catch { /* housekeeping never holds a session up */ }
    return next(e)
  })

  // Taint at the source, as a call is made, before its output reaches the transcript.
  on('tool.call', async ($, e, next) => {
    const io: Io = {
      run: (argv, init) => $.process.run(argv, init),
      get: (key) => $.store.get(key),
      set: (key, value) => $.store.set(key, value),
      log: (text) => $.ui.log(text),
      now: () => $.clock.now(),
      session: () => $.session.id(),
    }
    const tool = String(e.tool)
    await markTaint(io, options, tool, skillOf(tool, (e as { input?: unknown }).input))
    return next(e)
  }).catch((_$, e, next) => next(e))

  on('skill.prompt', async ($, e, next) => {
    const io: Io = {
      run: (argv, init) => $.process.run(argv, init),
      get: (key) => $.store.get(key),
      set: (key, value) => $.store.set(key, value),
      log: (text) => $.ui.log(text),
      now: () => $.clock.now(),
      session: () => $.session.id(),
    }
    await markTaint(io, options, null, e.pluginName ? `${e.pluginName}:${e.skill}` : e.skill)
    return next(e)
  })

  on('command.run', { command: COMMAND }, async ($, e) => {
    const failed = (reason: string) => ({ text: `factrail: the binary failed (${reason}); compaction falls back to Claude Code's own until it answers` })
    try {
      const session = await $.session.id()
      const { context } = await $.session.usage()
      const request = {
        protocol: 1,
        config: options,
        args: e.args,
        store: { enabled: held(await $.store.get(ENABLED)), taint: held(await $.store.get(taintKey(session))), last: held(await $.store.get(LAST)) },
        usage: usageOf(context),
        baseline: held(await $.store.get(baselineKey(session))),
        tools: toolRefs(await $.session.messages()),
      }
      const reply = await ask((argv, init) => $.process.run(argv, init), binary, 'status', request, TIMEOUTS.status)
      if (!reply.ok) return failed(reply.why)
      const status = readStatus(reply.body)
      if (!status.ok) return failed(status.why)
      if (status.enabled !== undefined) await $.store.set(ENABLED, status.enabled)
      return { text: status.text }
    } catch (error) {
      return failed(why(error))
    }
  }).catch(() => ({ text: "factrail: the status check did not answer in time; compaction falls back to Claude Code's own until it does" }))

  on('session.compact', async ($, e: SessionCompactInput, next): Promise<SessionCompactResult> => {
    let session: string | undefined
    // A compaction that stands on the main conversation resets the hysteresis: the binary reads
    // the next turn's size as the new baseline. A subagent's leaves the main baseline alone.
    const settle = async (result: SessionCompactResult): Promise<SessionCompactResult> => {
      try {
        if (session !== undefined && e.agentId === undefined && result.skip === undefined) {
          await $.store.set(baselineKey(session), { pending: true, at: await $.clock.now() })
        }
      } catch { /* the baseline is an optimisation */ }
      return result
    }
    let messages: readonly SessionMessage[] = []
    // what the built-in compaction gets: the event as it came, with the transcript it was read for
    const beneath = (instructions?: string): SessionCompactInput => ({
      ...e,
      ...(Array.isArray(e.messages) ? {} : { messages }),
      ...(instructions !== undefined ? { instructions } : {}),
    })
    const fallBack = async (reason: string): Promise<SessionCompactResult> => {
      const note = `factrail: built-in compaction (${reason})`
      try { $.ui.log(note); await $.store.set(LAST, note) } catch { /* logging only */ }
      return settle(await next(beneath()))
    }
    let compaction
    try {
      // The engine hands the transcript with the event; a host that does not (the test kit, for
      // a plugin's own `$.session.compact()`) leaves it to be read.
      messages = Array.isArray(e.messages) ? e.messages : await $.session.messages()
      session = await $.session.id()
      const { context } = await $.session.usage()
      const trigger = e.trigger ?? 'plugin'
      const cause = trigger === 'plugin' ? state.cause : undefined
      const request = {
        protocol: 1,
        config: options,
        session: { id: session, cwd: await $.session.cwd(), model: await $.session.model().then(named, () => null), trigger, agentId: e.agentId ?? null, ...(cause ? { cause } : {}) },
        instructions: e.instructions ?? null,
        messages: messages.map(wireMessage),
        usage: { tokens: context.tokens ?? null, window: context.window ?? null },
        store: { enabled: held(await $.store.get(ENABLED)), taint: held(await $.store.get(taintKey(session))) },
        now: await $.clock.now(),
      }
      const reply = await ask((argv, init) => $.process.run(argv, init), binary, 'compact', request, compactTimeoutMs(options))
      if (!reply.ok) return fallBack(reply.why)
      const read = readCompaction(messages, reply.body)
      if (!read.ok) return fallBack(`malformed answer: ${read.why}`)
      compaction = read.compaction
    } catch (error) {
      return fallBack(why(error))
    }
    try {
      const { taint, last, baseline } = compaction.writes
      if (taint !== undefined) await $.store.set(taintKey(session), taint)
      if (baseline !== undefined && e.agentId === undefined) await $.store.set(baselineKey(session), baseline)
      if (last !== undefined) await $.store.set(LAST, last)
      if (compaction.log) $.ui.log(compaction.log)
      if (compaction.toast) $.ui.toast(compaction.log ?? `factrail: ${compaction.reason ?? compaction.plan.action}`, { timeoutMs: TOAST_MS })
    } catch { /* bookkeeping; the plan below applies either way */ }
    const plan = compaction.plan
    if (plan.action === 'skip') return { skip: plan.reason }
    if (plan.action === 'install') return settle({ messages: plan.messages })
    return settle(await next(beneath(plan.instructions)))
  }).catch((_$, e, next) => next(e))

  on('turn.start', async (_$, e, next) => {
    if (e.agentId === undefined) {
      state.generation += 1
      state.turnRunning = true
      cancelNudge()
    }
    return next(e)
  })

  on('turn.complete', async ($, e, next) => {
    if (e.agentId !== undefined) return next(e)
    state.turnRunning = false
    cancelNudge()
    const done = await next(e)
    // Claimed before the first await below: two overlapping turn ends never both ask.
    if (state.compacting || state.evaluating) return done
    state.evaluating = true
    // Runs one compaction of this plugin's own; whether it stood.
    const compactNow = async (cause: string): Promise<boolean> => {
      if (state.compacting) return false
      state.compacting = true
      state.cause = cause
      try {
        const result = await $.session.compact()
        if (result.skip !== undefined) { $.ui.log(`factrail: ${cause} compaction skipped (${result.skip})`); return false }
        return true
      } catch (error) {
        // e.g. Claude Code 2.1.332 in print mode: "not available in a headless (-p / SDK)
        // session yet"; its own auto-compaction and /compact still run the session.compact hook
        $.ui.log(`factrail: ${cause} compaction not started (${why(error)})`)
        return false
      } finally {
        state.compacting = false
      }
    }
    // The nudge: when the session is still idle shortly before its prompt cache expires, say a
    // compaction is cheap now. It never compacts by itself: a compaction started from a timer
    // skips this plugin's own hooks (the engine's rule for a timer's calls), so Claude Code's
    // built-in summary would run in place of factrail's. `/compact` runs factrail's.
    const arm = (n: Nudge): void => {
      const armedAt = state.generation
      nudge = $.clock.after(n.delayMs, () => {
        nudge = undefined
        if (armedAt !== state.generation || state.turnRunning || state.compacting) return
        const size = n.tokens !== null ? `${Math.round(n.tokens / 1000)}k tokens` : 'a large context'
        const text = `factrail: ${size} in context and the prompt cache expires soon: /compact now and factrail compacts it while that is free`
        $.ui.log(text)
        $.ui.toast(text, { timeoutMs: NUDGE_TOAST_MS })
      })
    }
    try {
      const session = await $.session.id()
      const usage = await $.session.usage()
      const request = {
        protocol: 1,
        config: options,
        usage: usageOf(usage.context),
        baseline: held(await $.store.get(baselineKey(session))),
        rateLimits: usage.rateLimits.length,
        hasApiKey: (await $.env.get('ANTHROPIC_API_KEY')) !== undefined,
        event: { reason: e.reason, agentId: null },
        tools: toolRefs(await $.session.messages()),
        store: { taint: held(await $.store.get(taintKey(session))), enabled: held(await $.store.get(ENABLED)) },
        now: await $.clock.now(),
      }
      const reply = await ask((argv, init) => $.process.run(argv, init), binary, 'turn', request, TIMEOUTS.turn)
      if (!reply.ok) {
        $.ui.log(`factrail: turn check failed (${reply.why})`)
        return done
      }
      const turn = readTurn(reply.body)
      if (turn.baseline !== undefined) await $.store.set(baselineKey(session), turn.baseline)
      if (turn.taint !== undefined) await $.store.set(taintKey(session), turn.taint)
      if (turn.log) $.ui.log(turn.log)
      const stood = turn.compact ? await compactNow('threshold') : false
      if (!stood && turn.nudge) arm(turn.nudge)
    } catch (error) {
      $.ui.log(`factrail: turn check failed (${why(error)})`)
    } finally {
      state.evaluating = false
    }
    return done
  })
}
