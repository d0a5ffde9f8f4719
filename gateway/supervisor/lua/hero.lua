#!lua name=hero
-- Every job state transition, atomic inside Redis.
--
-- Loaded with FUNCTION LOAD by gateway/supervisor/library.py, which renders
-- the double-brace placeholders from keys.py (so key names are still spelled in
-- one place). Each transition writes the hash, moves the job between status
-- indexes and appends exactly one entry to the events stream.
--
-- Common ARGV head for every function (H entries): [1] events MAXLEN,
-- [2] "0" when legacy compat is off, else "1" then the legacy queues of each
-- type that has its own (";type=kind+kind", kinds work_queue and actor_queue;
-- a type not named uses work_queue), [3] retention of ended jobs in seconds
-- (0 keeps them), [4] retry backoff base and [5] cap in seconds, [6] a uniform
-- random number in [0, 1) for the backoff jitter (drawn by the caller: scripts
-- must stay deterministic), [7] MAXLEN of the dead-letter streams.
-- The rest is per function, from args[H + 1].
--
-- Stream mode (a job whose hash has mode=stream): its queue is a Redis Stream
-- read through the consumer group GROUP. The entry stays pending until the
-- job's result is recorded, then it is acked and deleted, so the stream holds
-- exactly the jobs not yet done and is never trimmed (trimming could drop a
-- job nobody has run). Dead letters of such jobs go to a stream trimmed with
-- MAXLEN ~.

local JOB = '{{JOB}}'
local EVENTS = '{{EVENTS}}'
local ENDED = '{{ENDED}}'
local ENDED_MAXLEN = '{{ENDED_MAXLEN}}'
local TRANSITIONS = '{{TRANSITIONS}}'
local IDX_ALL = '{{INDEX_ALL}}'
local IDX_STATUS = '{{INDEX_STATUS}}'
local IDX_TYPE = '{{INDEX_TYPE}}'
local IDX_CALLER = '{{INDEX_CALLER}}'
local REPLY = '{{REPLY}}'
local LEGACY_WORK = '{{LEGACY_WORK}}'
local LEGACY_ACTOR = '{{LEGACY_ACTOR}}'
local WORK = '{{WORK}}'
local STREAM = '{{STREAM}}'
local CTL = '{{CTL}}'
local ORPHANS = '{{ORPHANS}}'
local LEGACY_STOP = '{{LEGACY_STOP}}'
local LOGS = '{{LOGS}}'
local QUEUES = '{{QUEUES}}'
local DELAYED = '{{DELAYED}}'
local DLQ = '{{DLQ}}'
local ACTORS = '{{ACTORS}}'
local LEADER = '{{LEADER}}'
local WATCH = '{{WATCH}}'
local EXPIRE_CURSOR = '{{EXPIRE_CURSOR}}'
local EXPIRING = '{{EXPIRING}}'
local DLQ_STREAM = '{{DLQ_STREAM}}'
local GROUP = '{{STREAM_GROUP}}'
local IDLE = '{{IDLE}}'
local WAKE = '{{WAKE}}'
local H = 7

-- The globals the Functions use, held as upvalues. A Function's globals are
-- an empty table whose metatable leads to Redis's, so every use of a global
-- (`redis`, `tonumber`, `string`...) is three table reads; an upvalue is one.
-- While the library loads only `redis.register_function` and `redis.log`
-- exist, so they are bound at the first call (`wrap`).
local function globals()
  return redis.call, redis.pcall, tonumber, tostring, type, ipairs, pairs, next, unpack,
    pcall, error, string.format, string.sub, string.find, string.gmatch, math.floor, math.min,
    math.max, table.insert, table.remove, table.concat, cjson.encode, cjson.decode
end
local rcall, rpcall, tonumber, tostring, type, ipairs, pairs, next, unpack, pcall, error,
  format, sub, find, gmatch, floor, min, max, insert, remove, concat, encode, decode

-- The most entries an approximate trim of a stream takes (Redis's default
-- for one: 100 nodes of 100 entries).
local TRIM_LIMIT = 10000

-- The longest job id a submit or a claim takes: the contract's are at most
-- 128 characters; a 5 MB id pushed by anyone made a listing page of 15 MB
-- whose cursor could not be sent back (and the status indexes' long member,
-- see zadd_status, is longer).
local MAX_ID_BYTES = 1024

local TERMINAL = {finished = true, error = true, stopped = true, timeout = true, dlq = true}
local FAILED = {error = true, stopped = true, timeout = true, dlq = true}
local QUEUED = {created = true, waiting = true, dispatched = true, retrying = true}

local NONE = {}  -- an empty list to unpack, never written to
-- The longest JSON list of ids (prerequisites, dependents) or legacy copies
-- the Functions read from a job hash: anyone may write a hash, and decoding
-- a 40 MB list held Redis for seconds. About 40,000 dependents of one job.
local MAX_LIST_BYTES = 1048576


-- ISO 8601 of an epoch second up to its seconds (days-from-civil inverse,
-- proleptic Gregorian): "2026-12-02T01:02:27".
local function iso_second(sec)
  local days = floor(sec / 86400)
  local rem = sec - days * 86400
  local z = days + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return format('%04d-%02d-%02dT%02d:%02d:%02d', y, m, d,
    floor(rem / 3600), floor(rem % 3600 / 60), rem % 60)
end

-- The second `iso_second` spelled last, and how: every call of a Function
-- spells its time, and most fall in the second before them. Spelling one
-- took about 26,000 instructions, a quarter of a small call (a cycle that
-- offers, docs/performance.md); the library's locals live on between calls.
local spelled_sec, spelled

-- A TIME reply as the call's clock: epoch ms, and as text its ms ("ts", as
-- events and indexes carry it) and its ISO 8601 time to the ms (as job
-- hashes carry it), made from TIME's own digits rather than by formatting.
local function clock(t)
  local sec, usec = tonumber(t[1]), tonumber(t[2])
  if sec ~= spelled_sec then
    spelled_sec, spelled = sec, iso_second(sec)
  end
  local ms3 = sub(string.rep('0', 6 - #t[2]) .. t[2], 1, 3)  -- usec has no leading zeros
  return sec * 1000 + floor(usec / 1000), t[1] .. ms3, spelled .. '.' .. ms3 .. 'Z'
end

-- The legacy queue kinds per script type, from head entry [2].
local function legacy_kinds(spec)
  local kinds = {}
  for t, list in gmatch(spec, ';([^;=]+)=([^;]*)') do
    kinds[t] = {}
    for kind in gmatch(list, '[^+]+') do insert(kinds[t], kind) end
  end
  return kinds
end

-- The context of the Function call running now (set by `context`), so the
-- wrapper every Function is registered through (see `register`) can write
-- what the call left pending.
local current

-- Whether the call's head says compat mode (the legacy queues are served too).
local function in_compat(args)
  return args[2] ~= '0' and args[2] ~= ''
end

local function context(args)
  local t = rcall('TIME')
  local ms, ts, at = clock(t)
  local compat = in_compat(args)
  local ctx = {
    maxlen = args[1],
    compat = compat,
    legacy = compat and legacy_kinds(args[2]) or NONE,
    ttl = tonumber(args[3]),
    retry_base = tonumber(args[4]),
    retry_max = tonumber(args[5]),
    jitter = tonumber(args[6]),
    dlq_maxlen = args[7],
    ms = ms,
    ts = ts,
    iso = at,
    seen = {},  -- job id -> its EVENT_FIELDS, read once per call (see `about`)
    -- made when first needed (see `tab`; every table a call makes is garbage
    -- for Lua to collect, which costs more than most of the commands):
    -- fresh: job id -> its CLAIM_FIELDS as submit has just written them (see `take`);
    -- unwritten: job id -> its HSET arguments while submit has it in hand;
    -- replied: job ids whose reply this call has pushed (see `retain`);
    -- no_idle: script types whose idle hash this call found empty;
    -- open: script type -> the offers this call hands jobs to (see hand_off);
    -- spread: how many jobs the call may hand off (unset: one; see hand_off);
    -- routed: queues this call has recorded in QUEUES already;
    -- woken: queues whose idle actors this call has woken already;
    -- pushes, pushed: work queue -> the ids this call queued there, in order;
    -- from, to, moved: job id -> its status before the call, its status now;
    --   the ids, in order (see `move`);
    -- zadds, zkeys: sorted set -> {score, member, ...} to add, in order;
    -- counts: status -> script type -> transitions emitted (see `emit`);
    -- ended: status -> script type -> caller -> the ids this call ended (see retain);
    -- refused: job ids whose queue refused their push (see close_pushes);
    -- events, ends: the events and ended copies the call wrote, trimmed at `flush`.
  }
  ctx.time = t  -- (for `run_token`)
  current = ctx
  return ctx
end

-- Sorted-set writes wait for the end of the call (or the next read of a
-- status index in it: `flush`), where each set gets one ZADD (and one ZREM)
-- for all its members. (IDX_ALL, read by claims, is written late only by
-- submit, which no call that claims runs.) Nobody sees inside a call, so a status
-- index is written once per job per call, from the status before the call
-- to the one after: a job created, dispatched and started in one submit is
-- one ZADD to `started`, not three ZADDs and two ZREMs (docs/performance.md).
-- A flush also writes the hashes submit still holds (see set_status).
-- The per-call tables below are made on first use: every table a call makes
-- is garbage for Lua to collect, and most calls need few of them.
-- t[name], a table made on first use (for the colder paths; the hot ones
-- test `ctx[name]` inline, which saves a Lua call each time).
local function tab(t, name)
  local v = t[name]
  if not v then
    v = {}
    t[name] = v
  end
  return v
end

-- A list in `map` under `key`, created (and `key` appended to `order`) when new.
local function bucket(map, order, key)
  local list = map[key]
  if not list then
    list = {}
    map[key] = list
    order[#order + 1] = key
  end
  return list
end

local function zpend(ctx, key, score, member)
  if not ctx.zadds then ctx.zadds, ctx.zkeys = {}, {} end
  local list = bucket(ctx.zadds, ctx.zkeys, key)
  list[#list + 1] = score
  list[#list + 1] = member
end

-- A job's status index move, from its status before the call (`from`, false
-- for none) to its status now (`to`), written at `flush`.
local function move(ctx, id, old, new)
  local to = ctx.to
  if not to then
    to = {}
    ctx.to, ctx.from, ctx.moved = to, {}, {}
  end
  if not to[id] then
    ctx.from[id] = old or false
    ctx.moved[#ctx.moved + 1] = id
  end
  to[id] = new
end

-- `cmd key` with the `list` of arguments, at most `step` of them per command
-- (Lua's unpack has a limit).
local function batched(cmd, key, list, step)
  for i = 1, #list, step do
    rcall(cmd, key, unpack(list, i, min(i + step - 1, #list)))
  end
end

-- A sorted set of at most 128 members (zset-max-listpack-entries) is a
-- listpack, in which every ZADD and ZREM walks the whole set. The indexes of
-- the jobs in flight (created, dispatched, started) hover at that size under
-- load, and each move in or out of them cost about 20,000 instructions, as
-- much as the rest of the transition (docs/performance.md). A member longer
-- than zset-max-listpack-value makes Redis keep the set as a skiplist, and
-- ZADD and ZREM never turn one back; but a set that empties is deleted, and
-- the next ZADD makes a listpack again (the created index empties whenever
-- every created job has been started), as does a restart. So a status index
-- that is not a skiplist gets such a member before its ZADD (a missing one is
-- made a skiplist at once), removed again in the same call: no reader of the
-- data sees it (the AOF, a replica's stream and keyspace notifications carry
-- both writes). No job id is that member: submit refuses ids that long.
local long_member  -- longer than any job id a Function takes (built at first use)

local function zadd_status(key, list)
  -- (a call adding fewer than four members, `list` holding a score and a
  -- member each, is left to its set's encoding: the look would cost it more
  -- than it saves, and batches keep the set a skiplist)
  if #list < 8 or rcall('OBJECT', 'ENCODING', key) == 'skiplist' then
    batched('ZADD', key, list, 2000)
    return
  end
  long_member = long_member or string.rep('~', MAX_ID_BYTES + 76)
  rcall('ZADD', key, 0, long_member)
  batched('ZADD', key, list, 2000)
  rcall('ZREM', key, long_member)
end

-- The status moves pending, one ZREM and one ZADD per index.
local function flush_moves(ctx, moved)
  local from, to = ctx.from, ctx.to
  ctx.from, ctx.to, ctx.moved = nil, nil, nil
  if #moved == 1 then  -- the usual call of an idle actor or a lone submit
    local id = moved[1]
    local old, new = from[id], to[id]
    if old and old ~= new then rcall('ZREM', IDX_STATUS .. old, id) end
    zadd_status(IDX_STATUS .. new, {ctx.ts, id})
    return
  end
  local rem, rem_order, add, add_order = {}, {}, {}, {}
  local ts = ctx.ts
  for _, id in ipairs(moved) do
    local old, new = from[id], to[id]
    if old and old ~= new then
      local list = bucket(rem, rem_order, old)
      list[#list + 1] = id
    end
    local list = bucket(add, add_order, new)
    list[#list + 1] = ts
    list[#list + 1] = id
  end
  for _, st in ipairs(rem_order) do batched('ZREM', IDX_STATUS .. st, rem[st], 1000) end
  for _, st in ipairs(add_order) do zadd_status(IDX_STATUS .. st, add[st]) end
end

local close_offers  -- (defined with hand_off)
local write_tombstones  -- (defined with retain)
local refuse_push  -- (defined with the other failures)

-- The ids a call queued, one LPUSH per work queue (see dispatch). A work
-- queue is the protocol's: a producer that made it a key of another type
-- makes Redis refuse the push, and those ids end in error saying so
-- (refuse_push), not marked dispatched yet queued nowhere; the call's other
-- queues and writes go on.
local function close_pushes(ctx)
  local pushes, pushed = ctx.pushes, ctx.pushed
  ctx.pushes, ctx.pushed = nil, nil
  for _, q in ipairs(pushed) do
    local ids = pushes[q]
    for i = 1, #ids, 1000 do
      local r = rpcall('LPUSH', q, unpack(ids, i, min(i + 999, #ids)))
      if type(r) == 'table' and r.err then
        for j = i, #ids do refuse_push(ctx, ids[j], 'dispatched', q, r.err) end
        break
      end
    end
  end
end

-- A new job's hash, written from `w` as a hash table rather than a listpack.
-- Redis keeps a hash whose values are all short (hash-max-listpack-value,
-- 64 bytes) as a listpack, in which every field read or written is a walk
-- of the whole hash: a job hash has 18 to 27 fields and each transition
-- reads or writes about ten. A value longer than that turns it into a hash
-- table, for good, and a job's `log_path` (its actor's log folder and file)
-- is longer in most deployments: so the hash was turned over at the job's
-- last transition anyway, at a cost of its own. Written as a hash table
-- from the start, each of its reads and writes is a lookup
-- (docs/performance.md): its first HSET sets `updated_at` to a long value
-- first (Redis turns the hash over before it writes a field), and to its
-- real value later in the same command (`w` holds it), so no reader of the
-- data sees it (the AOF and a replica's stream carry the command as it is).
-- A job whose log path is short takes the hash table's memory without
-- needing it: about 1.4 KB more while it is kept.
local hashtable_value  -- (built at first use: string.rep is not there while the library loads)
local function write_new(jk, w)
  hashtable_value = hashtable_value or string.rep('~', 80)
  rcall('HSET', jk, 'updated_at', hashtable_value, unpack(w))
end

local function flush(ctx)
  if ctx.open then close_offers(ctx) end
  if ctx.pushed then close_pushes(ctx) end
  if ctx.unwritten then
    for id, w in pairs(ctx.unwritten) do write_new(JOB .. id, w) end
    ctx.unwritten = nil
  end
  if ctx.moved then flush_moves(ctx, ctx.moved) end
  if ctx.ended then write_tombstones(ctx) end
  if ctx.zkeys then
    for _, key in ipairs(ctx.zkeys) do batched('ZADD', key, ctx.zadds[key], 2000) end
    ctx.zadds, ctx.zkeys = nil, nil
  end
  if ctx.events then  -- the events of the call, trimmed once (see `emit`)
    rcall('XTRIM', EVENTS, 'MAXLEN', '~', ctx.maxlen, 'LIMIT', TRIM_LIMIT * ctx.events)
    if ctx.ends then
      rcall('XTRIM', ENDED, 'MAXLEN', '~', ENDED_MAXLEN, 'LIMIT', TRIM_LIMIT * ctx.ends)
    end
    ctx.events, ctx.ends = nil, nil
  end
  if ctx.counts then
    for status, per in pairs(ctx.counts) do
      for script_type, n in pairs(per) do
        rcall('HINCRBY', TRANSITIONS, status .. ':' .. script_type, n)
      end
    end
    ctx.counts = nil
  end
end

-- Every Function is registered wrapped in this: what its call left pending
-- is written when it returns (and when it fails part way, as its other
-- writes stay too: Redis does not roll a Function back).
local function wrap(f)
  return function(keys, args)
    if not rcall then
      rcall, rpcall, tonumber, tostring, type, ipairs, pairs, next, unpack, pcall, error,
        format, sub, find, gmatch, floor, min, max, insert, remove, concat, encode, decode =
        globals()
    end
    current = nil
    local ok, r = pcall(f, keys, args)
    if current then
      local ctx = current
      current = nil
      flush(ctx)
    end
    if not ok then error(r, 0) end
    return r
  end
end

-- What every event carries besides the transition. A call reads them once
-- per job: `about` caches them, and the only writes to `actor` and
-- `attempt` go through `note` (or set_status's extra fields).
local EVENT_FIELDS = {'script_type', 'group', 'instance', 'actor', 'caller_id', 'attempt'}
local EVENT_INDEX = {actor = 4, attempt = 6}

local function about(ctx, id)
  local f = ctx.seen[id]
  if not f then
    f = rcall('HMGET', JOB .. id, unpack(EVENT_FIELDS))
    ctx.seen[id] = f
  end
  return f
end

-- Keep the cache true after writing `pairs` (a flat field, value list).
local function note(ctx, id, pairs)
  local f = ctx.seen[id]
  if not f then return end
  for i = 1, #pairs, 2 do
    local at = EVENT_INDEX[pairs[i]]
    if at then f[at] = pairs[i + 1] end
  end
end

-- A terminal event carries the job's output when it is at most this many
-- bytes, so a run-and-wait needs no second read (supervisor/waits.py) and
-- subscribers see results as they happen, while the stream stays small.
local OUTPUT_IN_EVENT = 4096

-- `event` names the transition when it is not just the new status;
-- `output`: the job's output when the caller has just written it.
-- Each transition is also counted in TRANSITIONS per status and script type
-- (one HINCRBY per distinct pair at `flush`): the metrics read that hash
-- rather than every gateway reading every event (docs/performance.md).
-- A job hash's field as an event carries it: anyone may write a hash, and
-- 20 MB names copied into every event grew the stream by hundreds of MB.
-- Ours are identifiers (at most 128 bytes; an actor's name two of them).
-- The streams are trimmed once per call (`flush`, the same approximate
-- MAXLEN an XADD would apply) rather than by each XADD: nobody sees inside a
-- call, and each XADD's trim check and its four arguments were paid per event.
-- An approximate trim takes at most TRIM_LIMIT entries (see there): the
-- call's trim may take that many per event it wrote, as its XADDs could.
local EVENT_FIELD_BYTES = 512
local function short(value)
  if not value then return '' end
  return #value > EVENT_FIELD_BYTES and sub(value, 1, EVENT_FIELD_BYTES) or value
end

local function emit(ctx, id, status, err, event, output)
  local f = about(ctx, id)
  local st, group, inst, actor, caller, attempt =
    f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '', f[6] or '0'
  local counts = ctx.counts
  if not counts then
    counts = {}
    ctx.counts = counts
  end
  local per = counts[status]
  if not per then
    per = {}
    counts[status] = per
  end
  per[st] = (per[st] or 0) + 1
  local B = EVENT_FIELD_BYTES
  if #st > B or #group > B or #inst > B or #actor > B or #caller > B or #attempt > B then
    st, group, inst, actor, caller, attempt =
      short(st), short(group), short(inst), short(actor), short(caller), short(attempt)
  end
  local more = ctx.tag or NONE  -- (a started event's sandbox tag, see `take`)
  local terminal = TERMINAL[status]
  if terminal then
    local out = output or rcall('HGET', JOB .. id, 'output') or ''
    more = #out <= OUTPUT_IN_EVENT and {'output', out} or NONE
  end
  ctx.events = (ctx.events or 0) + 1
  local entry = rcall('XADD', EVENTS, '*', 'job_id', id, 'event', event or status, 'status', status, 'script_type', st,
    'group', group, 'instance', inst, 'actor', actor, 'caller_id', caller, 'attempt', attempt,
    'ts', ctx.ts, 'error', err or '', unpack(more))
  if terminal then  -- for waiters (supervisor/events.py), same id; the
    -- caller lets a waiter admitted for another (an id deleted and taken) be told apart
    ctx.ends = (ctx.ends or 0) + 1
    rcall('XADD', ENDED, entry, 'job_id', id, 'status', status, 'caller_id', caller, 'error', err or '', unpack(more))
  end
  return entry
end

-- The retention as text (`ttl` > 0), and `expiry` beside it: when the jobs
-- this call ends expire, in ms. Spelled once a call, when it first ends a
-- job: most calls end none.
local function retention(ctx)
  if not ctx.ttl_s then
    ctx.ttl_s = format('%d', ctx.ttl)
    ctx.expiry = format('%d', ctx.ms + ctx.ttl * 1000)
  end
  return ctx.ttl_s
end

-- An ended job, its reply and its logs live `ttl` more seconds; a tombstone
-- remembers which indexes to clean once the hash is gone (hero_prune). The
-- jobs a call ends with the same status, type and caller share a tombstone
-- of at most TOMBSTONE_IDS, {ids, status, script_type, caller_id}, written at
-- `flush`: they expire together, and a tombstone a job (its JSON and its
-- member of a large sorted set) cost about 4 % of a job's Redis. The first
-- id is under `id` too, as a tombstone of one job had it, so a library from
-- before shared tombstones still takes one off (pruning that job) if Redis
-- is given one again. A reply this call pushed got its TTL then (push_reply).
local TOMBSTONE_IDS = 100
local function retain(ctx, id, status)
  if ctx.ttl <= 0 then return end
  local jk, ttl_s = JOB .. id, retention(ctx)
  rcall('EXPIRE', jk, ttl_s)
  if not (ctx.replied and ctx.replied[id]) then rcall('EXPIRE', REPLY .. id, ttl_s) end
  rcall('EXPIRE', LOGS .. id, ttl_s)
  local f = about(ctx, id)
  local ids = tab(tab(tab(tab(ctx, 'ended'), status), f[1] or ''), f[5] or '')
  ids[#ids + 1] = id
end

-- A tombstone's member of EXPIRING (see retain; `id` for libraries before).
local function tombstone(ids, status, script_type, caller_id)
  return encode({ids = ids, id = ids[1], status = status, script_type = script_type,
    caller_id = caller_id})
end

-- The tombstones of the jobs this call ended (see retain), added with the
-- call's other sorted-set writes (`zpend`, written next by `flush`).
write_tombstones = function(ctx)
  for status, by_type in pairs(ctx.ended) do
    for script_type, by_caller in pairs(by_type) do
      for caller, ids in pairs(by_caller) do
        for i = 1, #ids, TOMBSTONE_IDS do
          local part = #ids <= TOMBSTONE_IDS and ids
            or {unpack(ids, i, min(i + TOMBSTONE_IDS - 1, #ids))}
          zpend(ctx, EXPIRING, ctx.expiry, tombstone(part, status, script_type, caller))
        end
      end
    end
  end
  ctx.ended = nil
end

-- The reply queue is the producer's to read (Hero protocol): one it made a
-- key of another type gets no reply, and the job still ends (else its end,
-- and every later call meeting it, would fail on WRONGTYPE).
local function push_reply(ctx, id, status, output, err)
  local rk = REPLY .. id
  rpcall('LPUSH', rk, encode({job_id = id, status = status, output = output, error = err}))
  if ctx.ttl > 0 then rcall('EXPIRE', rk, retention(ctx)) end
  tab(ctx, 'replied')[id] = true
end

-- The one way a status changes: hash, status index, event. `hashed`: the
-- caller writes status and updated_at itself (a hand-off, whose `started`
-- follows in the same call). A job submit is creating gets one HSET, when
-- submit is done with it (`unwritten`), unless it ends right away (then
-- the hash is written first, as the end sets its TTL).
local function set_status(ctx, id, old, new, extra, err, event, hashed)
  local w = ctx.unwritten and ctx.unwritten[id]
  if w and TERMINAL[new] then
    write_new(JOB .. id, w)
    ctx.unwritten[id], w = nil, nil
  end
  if w then
    w[2] = new  -- (submit put `status` first, `updated_at` second)
    if extra then
      for k = 1, #extra do w[#w + 1] = extra[k] end
    end
  elseif not hashed then
    if extra then
      rcall('HSET', JOB .. id, 'status', new, 'updated_at', ctx.iso, unpack(extra))
    else
      rcall('HSET', JOB .. id, 'status', new, 'updated_at', ctx.iso)
    end
  end
  local output
  if extra then  -- the output for the event, and the cached EVENT_FIELDS kept true
    local f = ctx.seen[id]
    for k = 1, #extra, 2 do
      local name = extra[k]
      if name == 'output' then
        output = extra[k + 1]
      elseif f and EVENT_INDEX[name] then
        f[EVENT_INDEX[name]] = extra[k + 1]
      end
    end
  end
  move(ctx, id, old, new)
  if TERMINAL[new] then
    retain(ctx, id, new)
  elseif TERMINAL[old or ''] then
    rcall('PERSIST', JOB .. id)  -- back in play (a replayed dead letter)
  end
  return emit(ctx, id, new, err, event, output)
end

local CLAIM_FIELDS = {'script', 'script_type', 'timeout', 'env_vars', 'caller_id',
  'context_id', 'attempt', 'retries', 'group', 'instance', 'legacy'}

-- Whether `key` is one of the family of keys starting with one of the
-- `prefixes`. A job hash is anyone's to write (a Hero producer's, DESIGN), so
-- a key named by one of its fields (`queue`, `legacy`, `ctl`) is used only
-- when it is of the family that field names: one naming any other key (an
-- index, hero:q:orphans) would have us push onto it or LREM it, and a key of
-- ours made another type stops every actor's cycle.
local function of_family(key, ...)
  if type(key) ~= 'string' then return false end
  for i = 1, select('#', ...) do
    local prefix = select(i, ...)
    if #key > #prefix and sub(key, 1, #prefix) == prefix then return true end
  end
  return false
end

-- The legacy queues a dispatch pushed the job to as well (its `legacy`
-- field): at most one per legacy kind, as dispatch writes it (a hash is
-- anyone's to write, and 5,000 names held Redis for 9 s of LREMs). Each is
-- LREMed with pcall: a legacy queue is the protocol's, and one made another
-- type is passed over (as a claim passes it over).
local LEGACY_KINDS = 2
local function legacy_copies(recorded)
  if not recorded or recorded == '' then return NONE end
  local out, seen = {}, {}
  for q in gmatch(sub(recorded, 1, 4096), '[^\n]+') do
    if of_family(q, LEGACY_WORK, LEGACY_ACTOR) and not seen[q] then
      seen[q] = true
      out[#out + 1] = q
      if #out == LEGACY_KINDS then break end
    end
  end
  return out
end

-- The job's CLAIM_FIELDS: what submit wrote in this call, else read.
local function claim_record(ctx, id)
  local rec = ctx.fresh and ctx.fresh[id]
  if not rec then return rcall('HMGET', JOB .. id, unpack(CLAIM_FIELDS)) end
  ctx.fresh[id] = nil
  return rec
end

-- A claimed job's row, as `take` makes it: its id, CLAIM_FIELDS but `legacy`,
-- its stream entry and its run token (model/library.py Claimed.from_row).
local CLAIMED_WIDTH = 13

-- The token of the runs a call's `take`s start: the call's time in µs, so two
-- runs of one job id (deleted and created again) never share it.
local function run_token(ctx)
  return ctx.time[1] .. format('%06d', tonumber(ctx.time[2]))
end

-- Mark a claimed job started by this actor; the row the actor runs it from.
-- Its copies in legacy queues go: an outside actor must not pop it after this.
-- `rec`: its CLAIM_FIELDS when the caller has read them (claim_one).
-- The run gets a token of its own (`run`, in the hash and at the end of the
-- row), which its actor sends back with its log writes, its report and
-- nowhere else: a job id deleted and created again may run on the same
-- actor as the same attempt, and only the token tells the two runs apart.
local function take(ctx, id, old, who, event, entry, rec)
  rec = rec or claim_record(ctx, id)
  for _, q in ipairs(legacy_copies(remove(rec))) do rpcall('LREM', q, 0, id) end
  -- the attempt counted up in the same HSET as the status
  rec[7] = format('%d', (tonumber(rec[7]) or 0) + 1)
  ctx.seen[id] = {rec[2], rec[9], rec[10], who.actor, rec[5], rec[7]}  -- as EVENT_FIELDS
  -- an actor running python jobs unconfined (HERO_SANDBOX=off) says so
  local off = who.sandbox == 'off' and {'sandbox', 'off'} or NONE
  ctx.tag = off
  ctx.run = ctx.run or run_token(ctx)
  set_status(ctx, id, old, 'started',
    {'actor', who.actor, 'ctl', who.ctl, 'lease', who.lease, 'started_at', ctx.iso,
     'finished_at', '', 'attempt', rec[7], 'run', ctx.run, unpack(off)}, nil, event)
  ctx.tag = nil
  insert(rec, 1, id)
  rec[#rec + 1] = entry or ''
  rec[#rec + 1] = ctx.run
  return rec
end

-- An actor with free slots (its last cycle found nothing more to claim)
-- offers them in its type's idle hash: field the actor's name, value its
-- offer as JSON {slots, held, ctl, lease, channel, sandbox} (written by
-- hero_cycle, see `offer`). A dispatch hands the job to one of them: moved to
-- its held list, marked started and published on its own channel, so it
-- starts running without a claim round trip. The offer is counted down, and
-- dropped when its last slot is taken, so the actor's next cycle (the one
-- reporting the job) offers again and no empty cycle comes between. An offer
-- whose actor's presence is gone is dropped.
--
-- A call picks as many of its type's offers at once as it may hand jobs
-- off (`ctx.spread`; a call of one job picks one, as before), at most
-- OFFERS_PER_PICK (`ctx.open`). It hands its jobs to them in turn (from a
-- random one: the head's jitter) and writes what it handed to each actor
-- when all are full (before more are picked) or the call ends
-- (`close_offers`): per actor one LPUSH of the ids to its held list, one
-- PUBLISH of their rows (a JSON array of claim rows) and one HSET or HDEL of
-- its offer, not one of each per job. Nobody sees inside a call, so the
-- actors, their held lists and offers are as if handed one job at a time; a
-- call that reads a held list or writes an offer itself closes what is open
-- first (hero_cycle, flush).
local OFFERS_PER_PICK = 16

local function pick_offers(ctx, script_type)
  if ctx.no_idle and ctx.no_idle[script_type] then return nil end  -- nothing offers inside a call
  local idle = IDLE .. script_type
  while true do
    local pick = rcall('HRANDFIELD', idle, min(ctx.spread or 1, OFFERS_PER_PICK),
      'WITHVALUES')
    if #pick == 0 then
      tab(ctx, 'no_idle')[script_type] = true
      return nil
    end
    local offers = {}
    for i = 1, #pick, 2 do
      local o = decode(pick[i + 1])
      if rcall('EXISTS', o[4]) == 1 then
        offers[#offers + 1] = {actor = pick[i], offer = o, ids = {}, rows = {}}
      else
        rcall('HDEL', idle, pick[i])
      end
    end
    if #offers > 0 then
      local open = {offers = offers, turn = floor(ctx.jitter * #offers)}
      tab(ctx, 'open')[script_type] = open
      return open
    end
  end
end

-- The next of the open offers with a free slot, in turn; nil when all are full.
local function next_offer(open)
  local n = #open.offers
  for _ = 1, n do
    open.turn = open.turn % n + 1
    local h = open.offers[open.turn]
    if h.offer[1] > 0 then return h end
  end
  return nil
end

local function close_offer(ctx, script_type)
  local open = ctx.open[script_type]
  ctx.open[script_type] = nil
  local idle = IDLE .. script_type
  for _, h in ipairs(open.offers) do
    local o = h.offer
    if #h.ids > 0 then
      if o[1] > 0 then
        rcall('HSET', idle, h.actor, encode(o))
      else
        rcall('HDEL', idle, h.actor)
      end
      rcall('LPUSH', o[2], unpack(h.ids))
    end
    if #h.rows > 0 then rcall('PUBLISH', o[5], encode(h.rows)) end
  end
end

close_offers = function(ctx)
  for script_type in pairs(ctx.open) do close_offer(ctx, script_type) end
  ctx.open = nil
end

-- `rec`: the job's CLAIM_FIELDS when the caller has read them (see `take`).
local function hand_off(ctx, id, old, script_type, rec)
  local open = ctx.open and ctx.open[script_type]
  local h = open and next_offer(open)
  if not h then
    if open then close_offer(ctx, script_type) end  -- all full: written (and gone) first
    open = pick_offers(ctx, script_type)
    h = open and next_offer(open)
    if not h then return false end
  end
  local o = h.offer
  set_status(ctx, id, old, 'dispatched', nil, nil, nil, true)  -- take writes the hash
  local row = take(ctx, id, 'dispatched',
    {actor = h.actor, ctl = o[3], lease = o[4], sandbox = o[6]}, nil, nil, rec)
  -- only a job taken uses a slot and goes to the held list: one whose take
  -- failed would wait there for ever, counted against the actor's claims
  o[1] = o[1] - 1
  h.ids[#h.ids + 1] = id
  h.rows[#h.rows + 1] = row
  return true
end

-- Into the job's queue, or straight to an idle actor when any of its type
-- may take it: not in stream mode (the stream is the record of delivery),
-- not in compat mode (a legacy actor could pop the job as well), and not
-- routed to a group (only that group's actors may run it).
-- `route`: its ROUTE_FIELDS, when the caller has them at hand (submit, or
-- a `dispatch_record`), with `rec`, its CLAIM_FIELDS, when read already.
local ROUTE_FIELDS = {'queue', 'worker_id', 'script_type', 'mode', 'group'}

-- What a dispatch needs of a job, read in one HMGET: CLAIM_FIELDS (1-11),
-- spelled again (the library's body may call no function when it loads),
-- then the rest of its route and the event's `actor` (12-15), then what a
-- start checks (16-17).
local DISPATCH_FIELDS = {'script', 'script_type', 'timeout', 'env_vars', 'caller_id',
  'context_id', 'attempt', 'retries', 'group', 'instance', 'legacy',
  'queue', 'worker_id', 'mode', 'actor', 'status', 'prerequisites'}

-- The job's route, its claim row's fields, status and prerequisites; its
-- EVENT_FIELDS are cached (`about`) on the way, so the whole dispatch
-- (hand-off included) reads the job once.
local function dispatch_record(ctx, id)
  local r = rcall('HMGET', JOB .. id, unpack(DISPATCH_FIELDS))
  local route = {r[12], r[13], r[2], r[14], r[9]}
  local st, prereqs = r[16], r[17]
  if st then ctx.seen[id] = {r[2], r[9], r[10], r[15], r[5], r[7]} end
  for i = #DISPATCH_FIELDS, 12, -1 do r[i] = nil end
  return route, r, st, prereqs
end

local function dispatch(ctx, id, old, route, rec)
  if not route then route, rec = dispatch_record(ctx, id) end
  local f = route
  if not of_family(f[1], f[4] == 'stream' and STREAM or WORK) then  -- see of_family
    return refuse_push(ctx, id, old, tostring(f[1] or ''), 'not a work queue')
  end
  local routed = tab(ctx, 'routed')
  if not routed[f[1]] then  -- for queue.stats, even when no job waits in it
    routed[f[1]] = true
    rcall('SADD', QUEUES, f[1])
  end
  local direct = f[4] ~= 'stream' and not ctx.compat and (f[5] or '') == ''
  if direct and hand_off(ctx, id, old, f[3], rec) then return f[1] end
  if f[4] == 'stream' then
    if rcall('EXISTS', f[1]) == 0 then
      rcall('XGROUP', 'CREATE', f[1], GROUP, '0', 'MKSTREAM')
    end
    local entry = rpcall('XADD', f[1], '*', 'job_id', id)
    if type(entry) == 'table' then return refuse_push(ctx, id, old, f[1], entry.err) end
    rcall('HSET', JOB .. id, 'entry', entry)
  else  -- written with the call's other ids for this queue (close_pushes)
    local ids = bucket(tab(ctx, 'pushes'), tab(ctx, 'pushed'), f[1])
    ids[#ids + 1] = id
  end
  local woken = tab(ctx, 'woken')
  if not woken[f[1]] then
    woken[f[1]] = true
    rcall('PUBLISH', WAKE .. f[3], f[1])
  end
  if ctx.compat then
    local copies = {}
    for _, kind in ipairs(ctx.legacy[f[3]] or {'work_queue'}) do
      local copy = kind == 'actor_queue' and LEGACY_ACTOR .. f[3]
        or LEGACY_WORK .. ((f[2] and f[2] ~= '') and f[2] or f[3])
      -- a legacy queue made another type is passed over, as a claim passes it
      local r = rpcall('LPUSH', copy, id)
      if type(r) == 'table' then
        redis.log(redis.LOG_WARNING, 'hero-gateway: legacy queue ' .. copy .. ' passed over: ' .. r.err)
      else
        copies[#copies + 1] = copy
      end
    end
    rcall('HSET', JOB .. id, 'legacy', concat(copies, '\n'))
  end
  set_status(ctx, id, old, 'dispatched')
  return f[1]
end

-- Read only: an empty list is the shared NONE. One longer than
-- MAX_LIST_BYTES is refused before it is decoded (see MAX_LIST_BYTES).
local function decode_list(raw)
  if not raw or raw == '' or raw == '[]' then return NONE end
  if #raw > MAX_LIST_BYTES then error('a list of more than ' .. MAX_LIST_BYTES .. ' bytes') end
  return decode(raw)
end

-- A JSON list of ids as anyone may have written it: its strings, none when
-- it is not one.
local function id_list(raw)
  local ok, list = pcall(decode_list, raw)
  if not ok or type(list) ~= 'table' then return NONE end
  local ids = {}
  for _, v in ipairs(list) do
    if type(v) == 'string' then ids[#ids + 1] = v end
  end
  return ids
end

-- After a job reached a terminal status: release or fail its dependents.
-- A worklist, not recursion, so a long chain of failures cannot blow the stack.
-- `dependents`: the job's dependents field, when the caller has read it.
-- A job ended: its waiting dependents fail with it, or start once all their
-- prerequisites finished. A dependent counts only while its own
-- prerequisites name the ended job: a `dependents` list can outlive its
-- jobs (a later job may reuse an id), and anyone may write one. Each
-- dependent is looked at once per walk, its prerequisites only while it
-- waits and only up to what a job may have (MAX_PREREQS_BYTES), and the
-- walk decodes at most WALK_BYTES in all: a list of 200 copies of one
-- dependent with a 1 MiB list of prerequisites held Redis for 5 s, and
-- grows to hours.
local MAX_PREREQS_BYTES = 16384  -- 100 ids of 128 characters, the contract's most
local WALK_BYTES = 4194304

local function on_terminal(ctx, id, status, dependents)
  if dependents == '[]' or dependents == '' then return end  -- the usual job
  local work = { {id, status, dependents} }
  local visited, budget = {}, WALK_BYTES
  while #work > 0 do
    local item = remove(work)
    for _, dep in ipairs(id_list(item[3] or rcall('HGET', JOB .. item[1], 'dependents'))) do
      local jk = JOB .. dep
      local waiting = not visited[dep] and rpcall('HGET', jk, 'status') == 'waiting'
      visited[dep] = true
      local size = waiting and rcall('HSTRLEN', jk, 'prerequisites') or 0
      if waiting and size <= MAX_PREREQS_BYTES and size <= budget then
        budget = budget - size
        local prereqs = id_list(rcall('HGET', jk, 'prerequisites'))
        local named = false
        for _, p in ipairs(prereqs) do
          if p == item[1] then named = true end
        end
        if named and FAILED[item[2]] then
          local msg = 'prerequisite ' .. item[1] .. ' ended ' .. item[2]
          set_status(ctx, dep, 'waiting', 'error', {'error', msg, 'finished_at', ctx.iso}, msg)
          insert(work, {dep, 'error'})
        elseif named then
          local ready = true
          for _, p in ipairs(prereqs) do
            if rpcall('HGET', JOB .. p, 'status') ~= 'finished' then
              ready = false
              break
            end
          end
          if ready then dispatch(ctx, dep, 'waiting') end
        end
      end
    end
  end
end

-- A status that an actor we did not write put straight into the hash, recorded
-- once: the status index and its event; for an end also finished_at, the
-- retention of our own ends, the job's dependents, and its copies still in its
-- queue and legacy queues go (queue.stats counts waiting jobs only). Outside
-- actors do not compare-and-set, so such an end may land while one of ours
-- still runs the job: the first recorded end is the job's (see finish), and
-- a later write into the hash of an ended job is no transition.
-- False when the hash's status is recorded already, or the job had ended.
local function record_outside(ctx, id, st)
  flush(ctx)  -- it reads the status indexes
  if rcall('ZSCORE', IDX_STATUS .. st, id) then return false end
  for ended in pairs(TERMINAL) do
    if rcall('ZSCORE', IDX_STATUS .. ended, id) then return false end
  end
  for _, old in ipairs({'dispatched', 'started', 'created', 'waiting', 'retrying'}) do
    if rcall('ZREM', IDX_STATUS .. old, id) == 1 then break end
  end
  rcall('ZADD', IDX_STATUS .. st, ctx.ms, id)
  local f = rcall('HMGET', JOB .. id, 'error', 'finished_at', 'queue', 'mode', 'legacy')
  if TERMINAL[st] then
    if (f[2] or '') == '' then rcall('HSET', JOB .. id, 'finished_at', ctx.iso) end
    if f[4] ~= 'stream' and of_family(f[3], WORK) then rcall('LREM', f[3], 0, id) end
    for _, q in ipairs(legacy_copies(f[5])) do rpcall('LREM', q, 0, id) end
    retain(ctx, id, st)
  end
  emit(ctx, id, st, f[1])
  if TERMINAL[st] then on_terminal(ctx, id, st) end
  return true
end

-- The attempts a job hash says were made: a whole number, at least one (an
-- actor we did not write never counts them). The field is anyone's to
-- write: 1.5 or 1e300 written back (and into a dead letter) failed every
-- listing of the dead letters.
local function attempts_of(text)
  local n = tonumber(text)
  if not n or n ~= n or n < 1 or n > 2147483647 then return 1 end
  return floor(n)
end

-- The job ends for good as `final`: a dead letter (with `reason`) when
-- final is 'dlq'; its reply is pushed and its dependents are told.
local function give_up(ctx, id, old, final, err, fields, reason)
  local f = rcall('HMGET', JOB .. id, 'attempt', 'script_type', 'mode')
  local attempt = attempts_of(f[1])
  for _, v in ipairs({'error', err, 'finished_at', ctx.iso}) do insert(fields, v) end
  push_reply(ctx, id, final, '', err)
  local event_id = set_status(ctx, id, old, final, fields, err)
  if final == 'dlq' and f[3] == 'stream' then
    rcall('XADD', DLQ_STREAM .. f[2], 'MAXLEN', '~', ctx.dlq_maxlen, '*', 'job_id', id,
      'reason', reason, 'last_error', err, 'dlq_ts', tostring(ctx.ms), 'attempt', tostring(attempt))
  elseif final == 'dlq' then
    -- the entry is named by its dlq event, so it can be found in the stream
    rcall('LPUSH', DLQ .. f[2], encode({
      id = event_id, job_id = id, reason = reason, error = err, attempt = attempt, ts = ctx.ms}))
  end
  on_terminal(ctx, id, final)
  return final
end

-- Back to its queue after the backoff of attempt number `attempt`.
local function retry_later(ctx, id, old, err, fields, attempt)
  local delay = min(ctx.retry_base * 2 ^ attempt + ctx.jitter, ctx.retry_max)
  insert(fields, 'error'); insert(fields, err)
  set_status(ctx, id, old, 'retrying', fields, err)
  rcall('ZADD', DELAYED, ctx.ms + floor(delay * 1000), id)
  return 'retrying'
end

-- A failed attempt (error, timeout, an actor that stopped answering): retry
-- after a backoff while attempts remain; then the dead-letter list when
-- retries were asked for, else the plain failure.
local function fail_attempt(ctx, id, old, status, err, extra)
  local jk = JOB .. id
  local f = rcall('HMGET', jk, 'attempt', 'retries')
  -- an actor we did not write never counts attempts: a failure is at least one
  local attempt = attempts_of(f[1])
  local retries = tonumber(f[2] or '0') or 0
  local fields = extra or {}
  insert(fields, 'attempt'); insert(fields, tostring(attempt))
  if attempt <= retries then return retry_later(ctx, id, old, err, fields, attempt) end
  local final = retries > 0 and 'dlq' or status
  return give_up(ctx, id, old, final, err, fields, 'attempts exhausted (last: ' .. status .. ')')
end

-- The actor running the job died. The job did not fail, so the attempt is
-- not spent (its `retries` stay whole) and it goes back to its queue; but
-- deaths have their own budget: the `max_deaths`-th death makes it a poison
-- job, dead-lettered instead of handed to the next actor to kill.
local function actor_died(ctx, id, err, max_deaths)
  local jk = JOB .. id
  local deaths = rcall('HINCRBY', jk, 'deaths', 1)
  if deaths >= max_deaths then
    return give_up(ctx, id, 'started', 'dlq', err, {}, 'poison')
  end
  local attempt = attempts_of(rcall('HGET', jk, 'attempt'))
  return retry_later(ctx, id, 'started', err, {'attempt', tostring(attempt - 1)}, deaths)
end

-- The text of an error raised inside a pcall (redis.call raises a table).
local function error_text(r)
  return type(r) == 'table' and r.err or tostring(r)
end

-- End a job in error now, from status `old`, `reason` as its error.
local function fail_now(ctx, id, old, reason)
  push_reply(ctx, id, 'error', '', reason)
  set_status(ctx, id, old, 'error', {'error', reason, 'finished_at', ctx.iso}, reason)
  on_terminal(ctx, id, 'error')
end

-- A job one of whose commands Redis refused ends in error, if its hash can
-- still say so.
local function set_aside(ctx, id, msg)
  local st = rcall('HGET', JOB .. id, 'status')
  if not TERMINAL[st or ''] then fail_now(ctx, id, st or nil, msg) end
end

-- `f(ctx, ...)` for one job of a many-job call. When Redis refuses one of
-- its commands (an outside producer left a key of the wrong type: the job's
-- hash, its caller's index), that job alone fails: it leaves `held` (when
-- given), ends in error where it can, and the call goes on with the others,
-- whose actor would otherwise die on every cycle. Redis keeps the writes made
-- before the failure, as it does for a whole call.
local function alone(ctx, held, id, f, ...)
  local ok, r = pcall(f, ctx, ...)
  if ok then return r end
  ctx.tag = nil  -- as `take` leaves it
  local msg = 'the job cannot be run: ' .. error_text(r)
  redis.log(redis.LOG_WARNING, 'hero-gateway: job ' .. id .. ' set aside: ' .. msg)
  if held then rpcall('LREM', held, 0, id) end
  pcall(set_aside, ctx, id, msg)
  return nil
end

local function end_refused(ctx, id, old, reason)
  for _, q in ipairs(legacy_copies(rcall('HGET', JOB .. id, 'legacy'))) do
    rpcall('LREM', q, 0, id)
  end
  fail_now(ctx, id, old, reason)
end

-- A job whose work queue `q` refused it (`err`; see close_pushes, dispatch)
-- ends in error, on its own, and its copies in legacy queues go, so no
-- outside actor runs an ended job. The call answers it as that error
-- (answer_pushed). Returns nothing: the job is queued nowhere.
refuse_push = function(ctx, id, old, q, err)
  tab(ctx, 'refused')[id] = true
  alone(ctx, nil, id, end_refused, id, old, 'queue ' .. q .. ' refused it: ' .. err)
end

local function promote_one(ctx, id)
  local route, rec, st = dispatch_record(ctx, id)
  if st == 'retrying' then dispatch(ctx, id, 'retrying', route, rec) end
end

local function promote(ctx, limit)
  local due = rcall('ZRANGEBYSCORE', DELAYED, '-inf', ctx.ms, 'LIMIT', 0, limit)
  for _, id in ipairs(due) do
    rcall('ZREM', DELAYED, id)
    alone(ctx, nil, id, promote_one, id)
  end
  return #due
end

-- Whether a job whose `caller_id` field is this may be touched by a call
-- naming `caller` (a user key's call; none or '': an admin's, any job).
-- Checked where the job is read for the change, in the same call: an id
-- deleted and taken by another caller since the gateway's owner check is
-- not theirs (model.job.belongs is its twin for the gateway's reads).
local function callers(caller_id, caller)
  return not caller or caller == '' or caller_id == caller
end

-- `known`: what submit has just written or read (prerequisites, their statuses,
-- route), so a job created and started in one call is not read back; else the job
-- is read once (`dispatch_record`), and a `caller` named must be its own.
-- Returns what the job's answer says (see `answer`): not_found, invalid_state
-- and the status, or its new status and its queue when dispatched.
local function start(ctx, id, known, caller)
  local st, prereqs, route, rec, statuses = 'created', nil, nil, nil, NONE
  if known then
    prereqs, route, statuses = known.prereqs, known.route, known.statuses
  else
    local raw
    route, rec, st, raw = dispatch_record(ctx, id)
    if not st or not callers(rec[5], caller) then return 'not_found' end
    if st ~= 'created' then return 'invalid_state', st end
    prereqs = decode_list(raw)
  end
  local pending = false
  for i, p in ipairs(prereqs) do
    local ps = statuses[i]
    if ps == nil then ps = rpcall('HGET', JOB .. p, 'status') end
    if type(ps) == 'table' then ps = false end  -- its key is no job hash now: gone
    if ps == false or FAILED[ps] then
      local msg = 'prerequisite ' .. p .. ' ended ' .. (ps or 'missing')
      set_status(ctx, id, st, 'error', {'error', msg, 'finished_at', ctx.iso}, msg)
      on_terminal(ctx, id, 'error')
      return 'error'
    elseif ps ~= 'finished' then
      pending = true
    end
  end
  if pending then
    set_status(ctx, id, st, 'waiting')
    return 'waiting'
  end
  return 'dispatched', dispatch(ctx, id, st, route, rec)
end

-- A submitted job's fields, in the order the binding sends them after its id
-- and prerequisites (model/library.py SUBMIT_FIELDS): the Hero protocol's
-- and ours, then group, instance and mode, "" when not set (those three are
-- written only when set: a missing field reads as empty everywhere, as in an
-- outside producer's hash, and each field costs every read of the hash).
local SUBMIT_WIDTH = 15

-- Create one job (and start it when asked): the job whose id is `a[i]`,
-- laid out as SUBMIT_WIDTH says.
-- A job submitted with a caller_id sees only that caller's jobs: an id held
-- by anyone else is 'taken' (existence is all it learns), a prerequisite of
-- anyone else's is as unknown as a missing one. Without a caller_id (an
-- admin, an outside producer) every job is visible. Starting an existing
-- created job happens here too, so no race lets a caller start another's.
-- A key of another type (an outside writer's) holds its id as taken, and
-- as a prerequisite it is no job: unknown.
local function submit(ctx, a, i, start_now)
  local id, prereq_json, owner = a[i], a[i + 1], a[i + 4]
  if #id > MAX_ID_BYTES then error('a job id of more than ' .. MAX_ID_BYTES .. ' bytes') end
  local jk = JOB .. id
  if rcall('EXISTS', jk) == 1 then  -- (a fresh id, the usual job, reads nothing)
    local existing = rpcall('HMGET', jk, 'status', 'queue', 'caller_id')
    if existing.err then return 'taken' end
    if existing[1] then
      if not callers(existing[3], owner) then return 'taken' end
      if start_now and existing[1] == 'created' then return start(ctx, id) end
      return 'exists', existing[1], existing[2] or ''
    end
  end
  local prereqs, linked, statuses = NONE, NONE, NONE
  if prereq_json ~= '[]' then
    prereqs = decode_list(prereq_json)
    -- each prerequisite's dependents with this job added, made before anything
    -- is written: one that is not a list of ids is no prerequisite (and not
    -- ours to mend), and a job refused half way would leave a hash behind
    linked, statuses = {}, {}  -- statuses: each prerequisite's, for a start in this call
    for k, p in ipairs(prereqs) do
      if p == id or rcall('TYPE', JOB .. p).ok ~= 'hash' then return 'bad_prerequisite', p end
      local pf = rcall('HMGET', JOB .. p, 'caller_id', 'dependents', 'status')
      if not callers(pf[1], owner) then return 'bad_prerequisite', p end
      statuses[k] = pf[3]
      local ok, deps = pcall(decode_list, pf[2])
      if not ok or type(deps) ~= 'table' then return 'bad_prerequisite', p end
      local more = {}
      for j, dep in ipairs(deps) do more[j] = dep end  -- (no unpack: its limit is ~8000)
      more[#more + 1] = id
      local encoded, text = pcall(encode, more)
      if not encoded or #text > MAX_LIST_BYTES then return 'bad_prerequisite', p end
      linked[k] = text
    end
  end
  local script_type, queue, group, inst, mode = a[i + 3], a[i + 11], a[i + 12], a[i + 13], a[i + 14]
  -- written once, with the status the job has when submit is done with it
  -- (`status` first: every read of the job looks for it)
  local w = {'status', 'created', 'updated_at', ctx.iso, 'attempt', '0',
    'script_type', script_type, 'caller_id', owner, 'script', a[i + 2],
    'context_id', a[i + 5], 'worker_id', a[i + 6], 'priority', a[i + 7], 'timeout', a[i + 8],
    'retries', a[i + 9], 'concurrent', 'false', 'env_vars', a[i + 10], 'queue', queue,
    'prerequisites', prereq_json, 'dependents', '[]', 'id', id, 'created_at', ctx.iso}
  if group ~= '' then w[#w + 1], w[#w + 2] = 'group', group else group = false end
  if inst ~= '' then w[#w + 1], w[#w + 2] = 'instance', inst else inst = false end
  if mode ~= '' then w[#w + 1], w[#w + 2] = 'mode', mode else mode = false end
  local unwritten = ctx.unwritten
  if not unwritten then
    unwritten = {}
    ctx.unwritten = unwritten
  end
  unwritten[id] = w
  ctx.seen[id] = {script_type, group, inst, false, owner, '0'}  -- as EVENT_FIELDS
  for k, p in ipairs(prereqs) do rcall('HSET', JOB .. p, 'dependents', linked[k]) end
  zpend(ctx, IDX_ALL, ctx.ts, id)
  zpend(ctx, IDX_TYPE .. script_type, ctx.ts, id)
  if owner ~= '' then zpend(ctx, IDX_CALLER .. owner, ctx.ts, id) end
  set_status(ctx, id, nil, 'created')
  local kind, queued = 'created', ''
  if start_now then
    local fresh = ctx.fresh
    if not fresh then
      fresh = {}
      ctx.fresh = fresh
    end
    -- as CLAIM_FIELDS, for a hand-off in this call (claim_record)
    fresh[id] = {a[i + 2], script_type, a[i + 8], a[i + 10], owner, a[i + 5], '0', a[i + 9],
      group, inst, false}
    kind, queued = start(ctx, id, {prereqs = prereqs, statuses = statuses,
      route = {queue, a[i + 6], script_type, mode, group}})  -- as ROUTE_FIELDS
  end
  w = unwritten[id]
  if w then
    write_new(jk, w)
    unwritten[id] = nil
  end
  return kind, queued
end

-- A many-job call's answer: three values per job, in order (model/library.py
-- reads them so; a table per job cost Redis more to send): what happened
-- (created, waiting, dispatched, error; not_found, invalid_state, exists,
-- taken, bad_prerequisite; failed: Redis refused one of its commands), then
-- a status, queue, prerequisite or message as each says, "" for none.
local function answer(out, n, kind, a, b)
  out[n + 1], out[n + 2], out[n + 3] = kind, a or '', b or ''
  return n + 3
end

-- The call's queued ids pushed before it answers: a job whose push was
-- refused answers as the error it ended in (see refuse_push), not as
-- dispatched. The job of the k-th answer is `args[first + (k - 1) * step]`;
-- a `dispatched` answer is that job's dispatch, and an `exists` or
-- `invalid_state` answer for the same id in the call says `error` now
-- (another caller's answer, `taken`, stays as it is).
local function answer_pushed(ctx, out, args, first, step)
  if ctx.pushed then close_pushes(ctx) end
  if ctx.refused then
    for k = 1, #out / 3 do
      local at = 3 * k - 2
      if ctx.refused[args[first + (k - 1) * step]] then
        if out[at] == 'dispatched' then out[at], out[at + 1] = 'error', ''
        elseif out[at] == 'exists' or out[at] == 'invalid_state' then out[at + 1] = 'error' end
      end
    end
  end
  return out
end

-- Jobs in one call (a batch, or one job): `submit` for each, one answer per
-- job, in order. The jobs may be several callers': a job whose submit Redis
-- refuses answers failed and the others go on (as in hero_start_jobs).
-- ARGV: head, start ("1"/"0"), then per job: job_id, prerequisites JSON and
--       its fields (SUBMIT_WIDTH in all)
local function hero_submit_many(_, args)
  local ctx = context(args)
  local start_now = args[H + 1] == '1'
  if start_now then ctx.spread = (#args - H - 1) / SUBMIT_WIDTH end
  local out, n = {}, 0
  for i = H + 2, #args, SUBMIT_WIDTH do
    local ok, kind, a, b = pcall(submit, ctx, args, i, start_now)
    if not ok then kind, a, b = 'failed', error_text(kind), '' end
    n = answer(out, n, kind, a, b)
  end
  return answer_pushed(ctx, out, args, H + 2, SUBMIT_WIDTH)
end

-- Start many created jobs in one call (the job.starts of a JSON-RPC batch):
-- each answered as a start of its own would be, in order (see `answer`). A
-- job whose start Redis refuses (a command inside it failed) answers failed
-- and the others go on, as if each had been a call of its own.
-- ARGV: head, then per job: job_id, caller ('' for none; see `callers`)
local function hero_start_jobs(_, args)
  local ctx = context(args)
  ctx.spread = (#args - H) / 2
  local out, n = {}, 0
  for i = H + 1, #args, 2 do
    local ok, kind, a = pcall(start, ctx, args[i], nil, args[i + 1])
    if not ok then kind, a = 'failed', error_text(kind) end
    n = answer(out, n, kind, a)
  end
  return answer_pushed(ctx, out, args, H + 1, 2)
end

-- Jobs from producers we did not write ----------------------------------------
-- Any Hero client may HSET a job hash and LPUSH its id onto a work queue. The
-- hash may lack every field of ours, carry fields we do not know, or come
-- after the id. An actor that pops such an id adopts the job: defaults for
-- what is missing, the indexes, and the events a job of ours has, so it shows
-- in job.get, job.list, queue.stats, subscriptions and the archive.

-- The statuses in which an outside producer leaves a job for an actor.
local OUTSIDE_WAITING = {created = true, dispatched = true, queued = true}

local function outside_waiting(status)
  return not status or status == '' or OUTSIDE_WAITING[string.lower(status)] == true
end

-- The parts of a canonical work queue key (as keys.parse_work_queue).
local function queue_parts(q)
  local parts = {}
  for p in gmatch(sub(q, #WORK + 1), '[^:]+') do parts[#parts + 1] = p end
  local r = {script_type = parts[1] or '', group = '', inst = '', prio = '1'}
  for i = 2, #parts - 1, 2 do r[parts[i]] = parts[i + 1] end
  return r
end

-- A whole number in [low, high] as text, else `default`.
local function whole(text, default, low, high)
  local n = tonumber(text)
  if n and n == floor(n) and n >= low and n <= high then return format('%d', n) end
  return default
end

-- `text` when it is JSON of the wanted kind ('object': of strings; 'array': of
-- strings), `empty` when absent, nil when malformed.
local function json_of(text, kind, empty, limit)
  if not text or text == '' then return empty end
  if #text > limit then return nil end  -- decoding 100 MB held Redis for 9 s
  local ok, v = pcall(decode, text)
  if not ok or type(v) ~= 'table' then return nil end
  for k, item in pairs(v) do
    if type(item) ~= 'string' or (kind == 'object') ~= (type(k) == 'string') then return nil end
  end
  return next(v) == nil and empty or text
end

local function some(value, default)
  return (value and value ~= '') and value or default
end

-- Whether `value` may go into a key or an event as a name (as IDENT_PATTERN).
local function ident(value)
  return type(value) == 'string' and #value <= 128 and find(value, '^%w[%w_.%-]*$') ~= nil
end

-- The most bytes of env_vars an adopted job may carry.
local MAX_ENV_BYTES = 65536

local ADOPT_FIELDS = {'script', 'script_type', 'group', 'instance', 'priority', 'timeout',
  'retries', 'created_at', 'env_vars', 'prerequisites', 'concurrent', 'caller_id'}

-- Fields only this library writes, which the Functions act on or report: an
-- outside job's hash is not trusted with them. A `legacy` list would have the
-- claim LREM whatever keys it names, `mode` stream would turn the type's work
-- list into a stream on a retry, a `deaths` that is not a number would fail
-- every reap (hero_reap's HINCRBY), an `entry` would be acked in a stream, a
-- `ctl` would take a stop request, a `lease` naming a key that always exists
-- would keep the job from ever timing out, `actor` and `sandbox` would say
-- who ran the job and how confined until an actor of ours takes it, and a
-- `run` would be a run's token before any run.
local OURS_ONLY = {'legacy', 'mode', 'deaths', 'entry', 'ctl', 'lease', 'actor', 'sandbox',
  'run'}

-- Fill in what a job of ours has, index the job and emit its `created` event.
-- The caller_id stays as the producer left it: none means admins only. The
-- script type is the queue's, which the actor popping it serves (a hash may
-- say otherwise, or carry any text, which would name index keys and metric
-- series).
-- Returns why the job cannot run, or nil.
local function adopt(ctx, id, q)
  local jk = JOB .. id
  local f = rcall('HMGET', jk, unpack(ADOPT_FIELDS))
  local from = queue_parts(q)
  local script_type = some(from.script_type, f[2] or '')
  rcall('HDEL', jk, unpack(OURS_ONLY))
  local env = json_of(f[9], 'object', '{}', MAX_ENV_BYTES)
  local created = f[8]
  if not (created and find(created, '^%d%d%d%d%-%d%d%-%d%dT')) then created = ctx.iso end
  rcall('HSET', jk, 'id', id, 'queue', q, 'attempt', '0', 'script_type', script_type,
    'group', ident(f[3]) and f[3] or from.group, 'instance', ident(f[4]) and f[4] or from.inst,
    'priority', whole(f[5], from.prio, 0, 2), 'timeout', whole(f[6], '300', 1, 2 ^ 31),
    'retries', whole(f[7], '0', 0, 1000), 'created_at', created, 'env_vars', env or '{}',
    'prerequisites', json_of(f[10], 'array', '[]', MAX_PREREQS_BYTES) or '[]',
    'dependents', '[]',
    'concurrent', f[11] == 'true' and 'true' or 'false')
  rcall('ZADD', IDX_ALL, ctx.ms, id)
  rcall('ZADD', IDX_TYPE .. script_type, ctx.ms, id)
  -- a caller id that is no identifier is no caller's (only admins see the job)
  if ident(f[12]) then rcall('ZADD', IDX_CALLER .. f[12], ctx.ms, id) end
  rcall('SADD', QUEUES, q)
  ctx.seen[id] = nil
  set_status(ctx, id, nil, 'created')
  if not f[1] then return 'the job hash has no script' end
  if not env and #f[9] > MAX_ENV_BYTES then return 'env_vars is larger than 64 KiB' end
  if not env then return 'env_vars is not a JSON object of strings' end
  return nil
end

-- An adopted job that cannot run ends in error, its reason as the error.
local function reject(ctx, id, reason)
  fail_now(ctx, id, 'created', reason)
end


-- An id popped from `q` into `held`: the row to run it from, or nil. An
-- outside id whose hash (or script) is not there yet is parked for
-- `grace_ms`, since its producer may LPUSH before it HSETs.
local function claim_one(ctx, held, who, q, id, grace_ms)
  if #id > MAX_ID_BYTES then  -- no job: it would name a hash, a reply, events and listings
    redis.log(redis.LOG_WARNING, 'hero-gateway: an id of ' .. #id .. ' bytes dropped from ' .. q)
    rcall('LREM', held, 1, id)
    return nil
  end
  if rcall('ZSCORE', IDX_ALL, id) then
    local rec = rcall('HMGET', JOB .. id, 'status', unpack(CLAIM_FIELDS))
    local st = remove(rec, 1)
    if st == 'dispatched' then return take(ctx, id, 'dispatched', who, nil, nil, rec) end
    if TERMINAL[st or ''] then record_outside(ctx, id, st) end  -- an outside actor ended it
  else
    local f = rcall('HMGET', JOB .. id, 'status', 'script')
    if f[2] and outside_waiting(f[1]) then
      local reason = adopt(ctx, id, q)
      if not reason then
        set_status(ctx, id, 'created', 'dispatched')
        return take(ctx, id, 'dispatched', who)
      end
      reject(ctx, id, reason)
    elseif outside_waiting(f[1]) then
      rcall('ZADD', ORPHANS, ctx.ms + grace_ms, encode({id = id, queue = q}))
      ctx.parked = true
    end  -- else another actor runs it, or ran it
  end
  rcall('LREM', held, 1, id)
  return nil
end

-- Parked ids whose grace is over: queued again when their job is complete
-- now, else failed with the reason.
local function settle_one(ctx, o)
  local f = rcall('HMGET', JOB .. o.id, 'status')
  if not rcall('ZSCORE', IDX_ALL, o.id) and outside_waiting(f[1]) then
    local missing = rcall('EXISTS', JOB .. o.id) == 0
    local reason = adopt(ctx, o.id, o.queue)
    if missing then reason = 'no job hash for the id popped from ' .. o.queue end
    if reason then reject(ctx, o.id, reason) else dispatch(ctx, o.id, 'created') end
  end
end

local function settle(ctx, limit)
  local due = rcall('ZRANGEBYSCORE', ORPHANS, '-inf', ctx.ms, 'LIMIT', 0, limit)
  for _, raw in ipairs(due) do
    rcall('ZREM', ORPHANS, raw)
    local o = decode(raw)
    alone(ctx, nil, o.id, settle_one, o)
  end
  return #due
end

-- Milliseconds until the next parked id is due (0: none parked); `first`:
-- the first of ORPHANS WITHSCORES when read already.
local function settle_due(ctx, first)
  first = first or rcall('ZRANGE', ORPHANS, 0, 0, 'WITHSCORES')
  if #first == 0 then return 0 end
  return max(tonumber(first[2]) - ctx.ms, 1)
end

-- Pop up to `count` jobs in queue order into the held list and mark them
-- started by `who.actor`. Stale ids (stopped, deleted, taken through another
-- queue) are dropped on the way; outside ones are adopted (claim_one).
local function claim(ctx, held, who, count, queues, grace_ms, out)
  -- One call instead of a pop per queue when all are empty (an idle actor's cycle).
  if count <= 0 or #queues == 0 or rcall('EXISTS', unpack(queues)) == 0 then
    return out
  end
  for _, q in ipairs(queues) do
    while #out < count do
      -- what is still wanted, in one pop and one push: the same as an LMOVE
      -- from the queue's tail to the held list's head for each id in turn.
      -- A queue someone made a key of another type is passed over, not the
      -- cycle's end.
      local ids = rpcall('RPOP', q, count - #out)
      if type(ids) == 'table' and ids.err then
        -- (any other refusal, a user without RPOP among them, fails the cycle)
        if not find(ids.err, 'WRONGTYPE', 1, true) then error(ids) end
        redis.log(redis.LOG_WARNING, 'hero-gateway: queue ' .. q .. ' passed over: ' .. ids.err)
        break
      end
      if not ids then break end
      batched('LPUSH', held, ids, 1000)
      for _, id in ipairs(ids) do
        out[#out + 1] = alone(ctx, held, id, claim_one, held, who, q, id, grace_ms)
      end
    end
  end
  return out
end

-- A consumer-group command on a work stream; a stream or group that does not
-- exist yet is created (from the start, so nothing already added is skipped).
local function grouped(stream, ...)
  local r = rpcall(...)
  if type(r) == 'table' and r.err then
    if find(r.err, 'NOGROUP', 1, true) then
      rcall('XGROUP', 'CREATE', stream, GROUP, '0', 'MKSTREAM')
    end
    return rcall(...)
  end
  return r
end

local function done_entry(stream, entry)
  rcall('XACK', stream, GROUP, entry)
  rcall('XDEL', stream, entry)
end

local function entry_job(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'job_id' then return fields[i + 1] end
  end
  return ''
end

-- Stream mode: take up to `count` entries for `who.consumer`; first, when
-- `idle_ms` > 0, those a silent consumer left unacknowledged that long
-- (XAUTOCLAIM), then new ones. A reclaimed job runs again while attempts
-- remain (at-least-once; its event is `redelivered`), else it fails for good.
-- Entries of jobs that are no longer waiting for them are acked and dropped.
-- One delivered entry: the row to run its job from, or false when the
-- entry is stale (acked here) or its job failed for an actor gone silent.
local function claim_entry(ctx, stream, who, entry, id, again)
  local f = rcall('HMGET', JOB .. id, 'status', 'entry', 'attempt', 'retries', 'actor')
  if f[2] ~= entry or not (f[1] == 'dispatched' or (again and f[1] == 'started')) then
    done_entry(stream, entry)
  elseif again and (tonumber(f[3]) or 0) > (tonumber(f[4]) or 0) then
    done_entry(stream, entry)
    fail_attempt(ctx, id, 'started', 'error', 'actor ' .. (f[5] or '?') .. ' stopped answering')
  else
    return take(ctx, id, f[1], who, again and 'redelivered' or nil, entry)
  end
  return false
end

local function claim_stream(ctx, stream, who, count, idle_ms, out)
  local got = {}
  if idle_ms > 0 then
    local cursor = '0-0'
    for _ = 1, 10 do  -- each XAUTOCLAIM looks at no more than 10 x COUNT entries
      local r = grouped(stream, 'XAUTOCLAIM', stream, GROUP, who.consumer, idle_ms, cursor,
        'COUNT', count - #got)
      cursor = r[1]
      for _, e in ipairs(r[2]) do got[#got + 1] = {e[1], e[2], true} end
      if cursor == '0-0' or #got >= count then break end
    end
  end
  if #got < count then
    local r = grouped(stream, 'XREADGROUP', 'GROUP', GROUP, who.consumer,
      'COUNT', count - #got, 'STREAMS', stream, '>')
    if r then
      for _, e in ipairs(r[1][2]) do got[#got + 1] = {e[1], e[2], false} end
    end
  end
  for _, g in ipairs(got) do
    local entry, id, again = g[1], entry_job(g[2]), g[3]
    -- each entry on its own, as `claim` takes each id: one Redis refuses
    -- goes (acked) with its job set aside, and the cycle goes on
    local row = alone(ctx, nil, id, claim_entry, stream, who, entry, id, again)
    if row then
      out[#out + 1] = row
    elseif row == nil then
      pcall(done_entry, stream, entry)
    end
  end
  return out
end

-- Record one result; ignored unless this actor still owns the job (a stop or
-- the reaper may have ended it meanwhile). A stream entry is acked only while
-- it is still this consumer's: a peer that reclaimed it acks its own run.
-- A reported run's place in its actor's book goes: its stream entry (acked
-- and deleted while it is pending for this consumer), or one held entry of
-- its id.
local function release(who, held, r)
  if who.consumer then
    local mine = rcall('XPENDING', who.stream, GROUP, r.entry, r.entry, 1, who.consumer)
    if #mine > 0 then done_entry(who.stream, r.entry) end
  else  -- from the tail, where the oldest runs are: the same entry, found sooner
    rcall('LREM', held, -1, r.id)
  end
end

local function finish(ctx, held, who, r)
  local id = r.id
  local f = rcall('HMGET', JOB .. id, 'script_type', 'group', 'instance', 'actor', 'caller_id',
    'attempt', 'status', 'dependents', 'run')
  local status, dependents, run = f[7], f[8], f[9]
  ctx.seen[id] = f  -- (EVENT_FIELDS come first)
  local ours = status == 'started' and f[4] == who.actor
  local token = r.run and r.run ~= ''
  -- (without a token) a report sent again after its reply was lost, while a
  -- later attempt of the job runs here: that attempt's held entry stays
  if ours and not token and r.attempt and r.attempt ~= '0' and f[6] ~= r.attempt then
    return 0
  end
  if ours and token and run ~= r.run then
    -- an earlier run of this id (of a job deleted and created again since, an
    -- earlier attempt, or one reaped and taken again; or a report of one sent
    -- again): its result is not the running job's, and of the id's held
    -- entries one is the running run's; a second is this run's own
    -- (a stream run's entry is its own)
    if who.consumer or #rcall('LPOS', held, id, 'COUNT', 2) > 1 then
      release(who, held, r)
    end
    return 0
  end
  release(who, held, r)
  if not ours then
    -- an outside actor that popped a legacy copy ended it first: that end is
    -- the job's, this run's result is dropped (but the end is recorded once)
    if TERMINAL[status or ''] then record_outside(ctx, id, status) end
    return 0
  end
  if r.status == 'error' or r.status == 'timeout' then
    fail_attempt(ctx, id, 'started', r.status, r.error, {'output', r.output, 'log_path', r.log_path})
    return 1
  end
  push_reply(ctx, id, r.status, r.output, r.error)
  set_status(ctx, id, 'started', r.status,
    {'output', r.output, 'error', r.error, 'finished_at', ctx.iso, 'log_path', r.log_path}, r.error)
  on_terminal(ctx, id, r.status, dependents)
  return 1
end

-- How many of `count` a list actor may claim: its held list holds every job
-- handed or claimed to it and not reported, `holding` says how many of
-- those it has in hand, so the rest were handed off and are still on their
-- way to it (or lost, until it adopts them). Its running jobs plus those
-- must stay within its concurrency.
local function room(held, count, holding)
  if count <= 0 then return 0 end
  local unseen = rcall('LLEN', held) - holding
  return unseen > 0 and max(count - unseen, 0) or count
end

-- The actor's free slots in the type's idle hash (see hand_off).
local function offer(idle, held, who, channel, slots)
  rcall('HSET', idle, who.actor,
    encode({slots, held, who.ctl, who.lease, channel, who.sandbox}))
end

-- One round trip per cycle for a busy actor: report what finished, promote
-- due retries and parked outside ids, take what is next.
-- A list actor whose claim leaves it room offers the free slots in its
-- type's idle hash (see hand_off); every cycle replaces or takes back the
-- offer it had standing (nobody hands off inside the call), so no older
-- offer outlives a cycle that claimed.
-- KEYS: held, idle hash, then the queues in pop order (stream mode: the one
--       work stream);
-- ARGV: head, actor, ctl key, lease (presence key), count, consumer (stream
--       mode; "" for lists), reclaim idle ms (0: don't reclaim), handoff
--       channel to offer free slots on ("": none), outside grace ms, sandbox
--       ("off" from an actor running python jobs without one, else ""),
--       holding (the jobs of its held list the actor has in hand, those
--       reported now left out), n_results, (id, status, output, error, log_path,
--       stream entry)*, then each result's attempt ("0": not known; an
--       actor that sends none is read as before), then each result's run
--       token (see `take`; "": not known)
-- Returns the ms until a parked id is due (0: none), so an idle actor knows
-- when to cycle again, then the claimed rows (see the end).
local function hero_cycle(keys, args)
  local ctx = context(args)
  local held, idle, channel = keys[1], keys[2], args[H + 7]
  local who = {actor = args[H + 1], ctl = args[H + 2], lease = args[H + 3], sandbox = args[H + 9]}
  local count, idle_ms, n = tonumber(args[H + 4]), tonumber(args[H + 6]), tonumber(args[H + 11])
  if args[H + 5] ~= '' then who.consumer, who.stream = args[H + 5], keys[3] end
  for i = 0, n - 1 do
    local b = H + 12 + i * 6
    alone(ctx, held, args[b], finish, held, who, {id = args[b], status = args[b + 1],
      output = args[b + 2], error = args[b + 3], log_path = args[b + 4], entry = args[b + 5],
      attempt = args[H + 12 + n * 6 + i], run = args[H + 12 + n * 7 + i]})
  end
  promote(ctx, 100)
  -- one read of ORPHANS when none is due (the usual cycle): settle only then
  local first = rcall('ZRANGE', ORPHANS, 0, 0, 'WITHSCORES')
  if #first > 0 and tonumber(first[2]) <= ctx.ms then
    settle(ctx, 100)
    first = nil
  end
  -- what was handed off or queued above is in its held list, offer and
  -- queue before the claim reads them
  if ctx.open then close_offers(ctx) end
  if ctx.pushed then close_pushes(ctx) end
  local out
  if who.consumer then
    out = claim_stream(ctx, who.stream, who, count, idle_ms, {})
  else
    local queues = {}
    for i = 3, #keys do queues[#queues + 1] = keys[i] end
    count = room(held, count, tonumber(args[H + 10]))
    out = claim(ctx, held, who, count, queues, tonumber(args[H + 8]), {})
    if channel ~= '' and #out < count then
      offer(idle, held, who, channel, count - #out)
    else
      rcall('HDEL', idle, who.actor)
    end
  end
  -- the ms until a parked id is due, then the claimed rows flat, CLAIMED_WIDTH
  -- values each (model/library.py cuts them so): a reply of one table per row
  -- cost Redis about as much to send as the claim's reads of the hash
  local reply, n = {settle_due(ctx, not ctx.parked and first or nil)}, 1
  for _, row in ipairs(out) do
    for k = 1, CLAIMED_WIDTH do reply[n + k] = row[k] end
    n = n + CLAIMED_WIDTH
  end
  return reply
end

-- Stream mode, on every heartbeat: reset the idle time of the entries this
-- consumer holds, so peers reclaim only a silent consumer's deliveries.
-- KEYS: stream ; ARGV: head, consumer
local function hero_stream_touch(keys, args)
  local pending = rpcall('XPENDING', keys[1], GROUP, '-', '+', 1000, args[H + 1])
  if type(pending) ~= 'table' or pending.err or #pending == 0 then return 0 end
  local ids = {}
  for _, row in ipairs(pending) do ids[#ids + 1] = row[1] end
  rcall('XCLAIM', keys[1], GROUP, args[H + 1], 0, unpack(ids), 'JUSTID')
  return #ids
end

-- Stream mode, for the maintenance leader: remove consumers that hold nothing
-- and have not read for `idle` ms (actors killed before a clean exit).
-- KEYS: stream ; ARGV: head, idle ms
local function hero_stream_prune(keys, args)
  local rows = rpcall('XINFO', 'CONSUMERS', keys[1], GROUP)
  if type(rows) ~= 'table' or rows.err then return 0 end
  local idle, n = tonumber(args[H + 1]), 0
  for _, row in ipairs(rows) do
    local c = {}
    for i = 1, #row, 2 do c[row[i]] = row[i + 1] end
    if c.pending == 0 and c.idle > idle then
      rcall('XGROUP', 'DELCONSUMER', keys[1], GROUP, c.name)
      n = n + 1
    end
  end
  return n
end

-- Stream mode, on a clean exit: forget this consumer unless it still holds
-- deliveries (those stay for a peer to reclaim). KEYS: stream ; ARGV: head, consumer
local function hero_stream_leave(keys, args)
  local pending = rpcall('XPENDING', keys[1], GROUP, '-', '+', 1, args[H + 1])
  if type(pending) ~= 'table' or pending.err or #pending > 0 then return 0 end
  return rcall('XGROUP', 'DELCONSUMER', keys[1], GROUP, args[H + 1])
end

-- A running job's output, from its actor, at most a few times a second (see
-- gateway/actor/livelog.py). `lines` (newline-separated, no final newline) is
-- appended to the job's log tail, kept to its last `cap` bytes and cut at a
-- line (else a character) boundary; a non-empty `tail` replaces the log tail
-- instead (the actor's last call: the whole tail of its log file). While the
-- job is still started by this actor, `lines` becomes a `log` event and a
-- `progress` ("" for none) a `progress` event with `message`; after the job
-- ended, nothing more is emitted (the terminal event stays the last one).
-- Only the run the job hash names writes: its `actor`, `attempt` and `run`
-- (the ones `take` set, kept by a stop or an end) are the caller's. Else the
-- call writes nothing and returns 0, and the actor stops reporting: its run
-- is no longer the job's (deleted and the id taken by another job, or a
-- later attempt runs), and its lines would land in that job's log.
-- ARGV: head, job_id, actor, lines, progress, message, cap, tail, attempt
-- ("0": not known, as from an actor that sends none: the actor alone decides),
-- run ("" or none: not known, likewise)
-- Returns 1 when written.
local function hero_log(_, args)
  local ctx = context(args)
  local id, actor, lines, progress = args[H + 1], args[H + 2], args[H + 3], args[H + 4]
  local message, cap, tail, attempt = args[H + 5], tonumber(args[H + 6]), args[H + 7], args[H + 8]
  local run = args[H + 9]
  -- one read: the status, the run, and the fields `emit` would read (EVENT_FIELDS)
  local f = rcall('HMGET', JOB .. id, 'status', 'run', unpack(EVENT_FIELDS))
  local status, held = remove(f, 1), remove(f, 1)
  if not status or f[EVENT_INDEX.actor] ~= actor then return 0 end
  if attempt and attempt ~= '0' and f[EVENT_INDEX.attempt] ~= attempt then return 0 end
  if run and run ~= '' and held ~= run then return 0 end  -- another job's run (see `take`)
  local lk = LOGS .. id
  if tail ~= '' then
    rcall('SET', lk, tail)
    if ctx.ttl > 0 then rcall('EXPIRE', lk, ctx.ttl) end
  elseif lines ~= '' and rcall('APPEND', lk, lines .. '\n') > cap then
    local kept = rcall('GETRANGE', lk, -cap, -1)
    local nl = find(kept, '\n', 1, true)
    if nl and nl < #kept then
      kept = sub(kept, nl + 1)
    else
      kept = string.gsub(kept, '^[\128-\191]+', '')
    end
    rcall('SET', lk, kept, 'KEEPTTL')
  end
  if status ~= 'started' then return 1 end
  -- the hash's names capped as `emit` caps them (anyone may write a hash)
  local common = {'job_id', id, 'event', '', 'status', 'started', 'script_type', short(f[1]),
    'group', short(f[2]), 'instance', short(f[3]), 'actor', short(f[4]),
    'caller_id', short(f[5]), 'attempt', short(f[6] or '0'), 'ts', ctx.ts, 'error', ''}
  local function add(event, ...)
    common[4] = event
    local fields = {unpack(common)}
    for _, v in ipairs({...}) do fields[#fields + 1] = v end
    rcall('XADD', EVENTS, 'MAXLEN', '~', ctx.maxlen, '*', unpack(fields))
  end
  if lines ~= '' then add('log', 'lines', lines) end
  if progress ~= '' then add('progress', 'progress', progress, 'message', message) end
  return 1
end

-- Tell the actor running job `id` to stop it: a message on its control
-- queue `ctl` (and, in compat mode, on the legacy stop queue outside actors
-- read, their worker's or their type's).
local function tell_stop(compat, id, ctl, worker_id, script_type, run)
  if of_family(ctl, CTL) then  -- the run: a later run of the id on that actor goes on
    rcall('LPUSH', ctl, encode({action = 'stop', job_id = id, run = run or ''}))
  end
  if compat then  -- a legacy queue made another type is passed over (as in dispatch)
    local target = (worker_id and worker_id ~= '') and worker_id or script_type or ''
    local r = rpcall('LPUSH', LEGACY_STOP .. target, id)
    if type(r) == 'table' and r.err then
      redis.log(redis.LOG_WARNING, 'hero-gateway: legacy stop queue passed over: ' .. r.err)
    end
  end
end

-- Stop: a queued job leaves its queue; a running one gets a stop message on
-- its actor's control queue (and the legacy stop queue in compat mode).
-- ARGV: head, job_id[, caller] (see `callers`)
local function hero_stop(_, args)
  local ctx = context(args)
  local id = args[H + 1]
  local jk = JOB .. id
  local f = rpcall('HMGET', jk, 'status', 'queue', 'ctl', 'worker_id', 'script_type', 'mode',
    'legacy', 'caller_id', 'run')
  local st = f[1]
  -- (a key of another type is no job)
  if f.err or not st or not callers(f[8], args[H + 2]) then return {'not_found'} end
  if TERMINAL[st] then return {'invalid_state', st} end
  if QUEUED[st] then
    -- a stream entry stays: the actor that reads it drops it (deleting an
    -- undelivered entry would make the group's lag unknowable)
    if f[6] ~= 'stream' and of_family(f[2], WORK) then rcall('LREM', f[2], 0, id) end
    rcall('ZREM', DELAYED, id)
    for _, q in ipairs(legacy_copies(f[7])) do rpcall('LREM', q, 0, id) end
  else
    tell_stop(ctx.compat, id, f[3], f[4], f[5], f[9])
  end
  set_status(ctx, id, st, 'stopped', {'error', 'stopped', 'finished_at', ctx.iso}, 'stopped')
  on_terminal(ctx, id, 'stopped')
  return {'stopped'}
end

-- A running job's actor is told to stop it (as by hero_stop), so a deleted
-- job does not run on to its end; what it reports after is dropped, as for
-- any job whose hash is gone.
-- ARGV: head, job_id[, caller] (see `callers`)
local function hero_delete(_, args)
  local id = args[H + 1]
  local jk = JOB .. id
  local f = rpcall('HMGET', jk, 'status', 'queue', 'script_type', 'caller_id', 'mode', 'legacy',
    'ctl', 'worker_id', 'run')
  -- a key of another type is no job: left alone
  if f.err or not f[1] or not callers(f[4], args[H + 2]) then return 0 end
  if f[1] == 'started' then tell_stop(in_compat(args), id, f[7], f[8], f[3], f[9]) end
  if f[5] ~= 'stream' and of_family(f[2], WORK) then rcall('LREM', f[2], 0, id) end
  for _, q in ipairs(legacy_copies(f[6])) do rpcall('LREM', q, 0, id) end
  rcall('ZREM', IDX_ALL, id)
  rcall('ZREM', IDX_STATUS .. f[1], id)
  if f[3] then rcall('ZREM', IDX_TYPE .. f[3], id) end  -- (a producer's hash may lack it)
  if f[4] and f[4] ~= '' then rcall('ZREM', IDX_CALLER .. f[4], id) end
  rcall('ZREM', DELAYED, id)
  rcall('DEL', jk, REPLY .. id, LOGS .. id)
  return 1
end

-- Maintenance, run by the elected leader --------------------------------------

-- ARGV: head, holder, ttl ms. True while `holder` leads.
local function hero_lead(_, args)
  local holder, ttl = args[H + 1], args[H + 2]
  if rcall('SET', LEADER, holder, 'NX', 'PX', ttl) then return 1 end
  if rcall('GET', LEADER) == holder then
    rcall('PEXPIRE', LEADER, ttl)
    return 1
  end
  return 0
end

-- The clock of the dead-actor detector: a presence deadline (the score in
-- ACTORS) counts only time in which Redis was reachable. The leader stamps
-- WATCH on every tick; a stamp older than `gap` (a third of the presence
-- TTL, or two ticks) means nobody reached Redis meanwhile (it was down or
-- paused, or no gateway led), so every actor's presence may have lapsed
-- through no fault of its own: each gets a full TTL from now to show itself.
-- ARGV: head, presence TTL ms, gap ms. Returns the time lost (0: none).
local function hero_watch(_, args)
  local ctx = context(args)
  local ttl = tonumber(args[H + 1])
  local gap = tonumber(args[H + 2]) or ttl / 3
  local last = tonumber(rcall('GET', WATCH) or '')
  rcall('SET', WATCH, ctx.ms)
  if not last or ctx.ms - last <= gap then return 0 end
  local rows = rcall('ZRANGE', ACTORS, 0, -1, 'WITHSCORES')
  for i = 1, #rows, 2 do
    if tonumber(rows[i + 1]) < ctx.ms + ttl then rcall('ZADD', ACTORS, ctx.ms + ttl, rows[i]) end
  end
  return ctx.ms - last
end

-- An instance whose presence deadline passed. If its key is there (it came
-- back, or it is an outside actor that refreshes only its key), only the
-- deadline moves to the key's expiry. Else it died: each job it held goes
-- through actor_died. KEYS: held ; ARGV: head, presence key, max deaths, TTL ms
local function reap_one(ctx, id, lease, max_deaths)
  local f = rcall('HMGET', JOB .. id, 'status', 'lease', 'actor')
  if f[1] ~= 'started' or f[2] ~= lease then return 0 end
  actor_died(ctx, id, 'actor ' .. (f[3] or '?') .. ' died', max_deaths)
  return 1
end

local function hero_reap(keys, args)
  local ctx = context(args)
  local held, lease, max_deaths = keys[1], args[H + 1], tonumber(args[H + 2])
  local left = rcall('PTTL', lease)
  if left ~= -2 then
    rcall('ZADD', ACTORS, ctx.ms + (left >= 0 and left or tonumber(args[H + 3])), lease)
    return 0
  end
  local n = 0
  for _, id in ipairs(rcall('LRANGE', held, 0, -1)) do  -- each `alone`: see there
    n = n + (alone(ctx, nil, id, reap_one, id, lease, max_deaths) or 0)
  end
  rcall('DEL', held)
  rcall('ZREM', ACTORS, lease)
  return n
end

-- Started jobs past timeout + grace whose actor has no presence (hash-only and
-- legacy actors, or an actor that vanished) end in timeout.
-- ARGV: head, grace ms, limit
local function expire_one(ctx, idx, id, since, grace)
  local f = rcall('HMGET', JOB .. id, 'status', 'timeout', 'lease')
  local deadline = since + (tonumber(f[2] or '300') or 300) * 1000 + grace
  -- alive: its key is there, or the detector still waits for it (see hero_watch)
  local alive = f[3] and f[3] ~= '' and (rcall('EXISTS', f[3]) == 1
    or (tonumber(rcall('ZSCORE', ACTORS, f[3])) or 0) > ctx.ms)
  if TERMINAL[f[1] or ''] then
    -- an outside actor ended it in the hash and nobody waited to notice
    return record_outside(ctx, id, f[1]) and 1 or 0
  elseif f[1] == 'started' and deadline < ctx.ms and not alive then
    fail_attempt(ctx, id, idx, 'timeout', 'timed out: no answer from its actor')
    return 1
  end
  return 0
end

local function hero_expire(_, args)
  local ctx = context(args)
  local grace, limit = tonumber(args[H + 1]), tonumber(args[H + 2])
  local n = 0
  for _, idx in ipairs({'started', 'dispatched'}) do
    flush(ctx)
    -- from where the last pass stopped, back to the start at the end: more
    -- than `limit` jobs in one status (a backlog, or jobs parked there on
    -- purpose) used to hide every later one from this pass for good
    local from = tonumber(rcall('HGET', EXPIRE_CURSOR, idx)) or 0
    local rows = rcall('ZRANGE', IDX_STATUS .. idx, from, from + limit - 1, 'WITHSCORES')
    rcall('HSET', EXPIRE_CURSOR, idx, #rows < 2 * limit and 0 or from + limit)
    for i = 1, #rows, 2 do  -- a job whose key Redis refuses stops no other (`alone`)
      local id, since = rows[i], tonumber(rows[i + 1])
      n = n + (alone(ctx, nil, id, expire_one, idx, id, since, grace) or 0)
    end
  end
  return n
end

-- A job created and never started, stopped as job.stop would stop it (its
-- waiting dependents fail with it), so abandoned creates do not stay for
-- good. An index entry its hash no longer bears out is settled: a status
-- written into the hash since is recorded as an outside actor's would be
-- (record_outside: its index, its event, an end's TTL); a hash gone, or a
-- key of another type, leaves the listings. Either way no stale entry holds
-- the pass back from the jobs behind it.
local function abandon_one(ctx, id, reason)
  local f = rpcall('HMGET', JOB .. id, 'status', 'dependents')
  if f.err or not f[1] then  -- (a key of another type is no job)
    rcall('ZREM', IDX_STATUS .. 'created', id)
    rcall('ZREM', IDX_ALL, id)
    return 0
  end
  if f[1] ~= 'created' then
    if not record_outside(ctx, id, f[1]) then rcall('ZREM', IDX_STATUS .. 'created', id) end
    return 0
  end
  set_status(ctx, id, 'created', 'stopped', {'error', reason, 'finished_at', ctx.iso}, reason)
  on_terminal(ctx, id, 'stopped', f[2] or '')
  return 1
end

-- The oldest jobs still created `created_ms` after they were (a status
-- index's score is when its job entered that status), `limit` a call: each
-- may fail a walk of dependents (on_terminal), so a call is kept small and
-- a backlog goes over several ticks. ARGV: head, created ms, limit
local function hero_abandon(_, args)
  local ctx = context(args)
  local created_ms, limit = tonumber(args[H + 1]), tonumber(args[H + 2])
  local due = rcall('ZRANGEBYSCORE', IDX_STATUS .. 'created', '-inf',
    format('%d', ctx.ms - created_ms), 'LIMIT', 0, limit)
  local reason = 'not started within ' .. floor(created_ms / 1000) .. ' s of its creation'
  local n = 0
  for _, id in ipairs(due) do
    n = n + (alone(ctx, nil, id, abandon_one, id, reason) or 0)
  end
  return n
end

-- Drop index entries of ended jobs whose hash has expired.
-- A hash may outlive its tombstone's score by a few ms (the ending call's
-- EXPIREs count from the clock as they run, its tombstone from the call's
-- start, and a key expires only once that time is past): those ids, still
-- expiring, go into a tombstone of their own, due when the hash goes. A hash
-- kept for good (a dead letter replayed) or of a job made again under the id
-- is left to its own end.
-- ARGV: head, limit (of jobs: the tombstones due are taken whole, in order,
-- until that many jobs were looked at). Returns the jobs looked at.
local function hero_prune(_, args)
  local ctx = context(args)
  local limit, n = tonumber(args[H + 1]), 0
  while n < limit do
    local due = rcall('ZRANGEBYSCORE', EXPIRING, '-inf', ctx.ms, 'LIMIT', 0, 16)
    if #due == 0 then break end
    for _, raw in ipairs(due) do
      local t = decode(raw)
      local later, last = nil, 0  -- ids whose hash expires after this tombstone
      -- (a tombstone written before they were shared names one job)
      for _, id in ipairs(t.ids or {t.id}) do
        local left = rcall('PTTL', JOB .. id)
        if left == -2 then  -- (no such key)
          rcall('ZREM', IDX_ALL, id)
          rcall('ZREM', IDX_STATUS .. t.status, id)
          rcall('ZREM', IDX_TYPE .. t.script_type, id)
          if t.caller_id ~= '' then rcall('ZREM', IDX_CALLER .. t.caller_id, id) end
          -- an outside actor may push its reply after we recorded its end (and
          -- set the reply's TTL on nothing): the reply goes with its job
          rcall('DEL', REPLY .. id)
        elseif left >= 0 then
          later = later or {}
          later[#later + 1], last = id, max(last, left)
        end
        n = n + 1
      end
      rcall('ZREM', EXPIRING, raw)
      if later then
        rcall('ZADD', EXPIRING, ctx.ms + last + 1,
          tombstone(later, t.status, t.script_type, t.caller_id))
      end
      if n >= limit then break end
    end
  end
  return n
end

-- ARGV: head
local function hero_promote(_, args)
  local ctx = context(args)
  return promote(ctx, 1000) + settle(ctx, 1000)
end

-- A status written straight into the hash by an actor we did not write (the
-- wait sweep finds it): recorded as record_outside says. ARGV: head, job_id
local function hero_reconcile(_, args)
  local ctx = context(args)
  local id = args[H + 1]
  local st = rcall('HGET', JOB .. id, 'status')
  if not st then return 0 end
  return record_outside(ctx, id, st) and 1 or 0
end

-- Put dead-lettered jobs back in their queue with fresh attempts, from the
-- type's dead-letter list and its dead-letter stream.
-- ARGV: head, script type, job ids... (none: all of that type's dead letters)
local function hero_dlq_replay(_, args)
  local ctx = context(args)
  local wanted = {}
  for i = H + 2, #args do wanted[args[i]] = true end
  local all = next(wanted) == nil
  local replayed = {}
  local function replay(id)
    if rcall('HGET', JOB .. id, 'status') == 'dlq' then
      local fresh = {'attempt', '0', 'deaths', '0', 'error', '', 'finished_at', ''}
      rcall('HSET', JOB .. id, unpack(fresh))
      note(ctx, id, fresh)
      rcall('DEL', REPLY .. id)  -- the dead letter's answer: not this round's
      dispatch(ctx, id, 'dlq')
      insert(replayed, id)
    end
  end
  local list = DLQ .. args[H + 1]
  for _, raw in ipairs(rcall('LRANGE', list, 0, -1)) do
    local id = decode(raw).job_id
    if all or wanted[id] then
      rcall('LREM', list, 1, raw)
      replay(id)
    end
  end
  local stream = DLQ_STREAM .. args[H + 1]
  for _, e in ipairs(rcall('XRANGE', stream, '-', '+')) do
    local id = entry_job(e[2])
    if all or wanted[id] then
      rcall('XDEL', stream, e[1])
      replay(id)
    end
  end
  return replayed
end

redis.register_function('hero_lead', wrap(hero_lead))
redis.register_function('hero_reap', wrap(hero_reap))
redis.register_function('hero_watch', wrap(hero_watch))
redis.register_function('hero_expire', wrap(hero_expire))
redis.register_function('hero_abandon', wrap(hero_abandon))
redis.register_function('hero_promote', wrap(hero_promote))
redis.register_function('hero_prune', wrap(hero_prune))
redis.register_function('hero_reconcile', wrap(hero_reconcile))
redis.register_function('hero_dlq_replay', wrap(hero_dlq_replay))
redis.register_function('hero_submit_many', wrap(hero_submit_many))
redis.register_function('hero_start_jobs', wrap(hero_start_jobs))
redis.register_function('hero_cycle', wrap(hero_cycle))
redis.register_function('hero_stream_touch', wrap(hero_stream_touch))
redis.register_function('hero_stream_leave', wrap(hero_stream_leave))
redis.register_function('hero_stream_prune', wrap(hero_stream_prune))
redis.register_function('hero_stop', wrap(hero_stop))
redis.register_function('hero_delete', wrap(hero_delete))
redis.register_function('hero_log', wrap(hero_log))
