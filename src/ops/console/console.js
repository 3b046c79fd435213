// tidelog web console: plain browser JavaScript, no dependencies, no build step. It polls
// the broker's JSON API (/api/*) and renders with textContent only, so record data and
// topic names are never interpreted as HTML.
;(() => {
  const CLUSTER_POLL_MS = 1000
  const DETAIL_POLL_MS = 3000
  const RATE_POLL_MS = 2000
  const CHART_POINTS = 60

  const $ = (id) => document.getElementById(id)

  /** h('td', { class: 'x' }, 'text', child) */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag)
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue
      el.setAttribute(name, value === true ? '' : String(value))
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue
      el.append(child instanceof Node ? child : document.createTextNode(String(child)))
    }
    return el
  }

  function fill(table, headers, rows) {
    table.replaceChildren(
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          headers.map((name) => h('th', {}, name)),
        ),
      ),
      h('tbody', {}, rows),
    )
  }

  let failures = 0
  function setStatus(text, isError) {
    const status = $('status')
    status.textContent = text
    status.className = isError ? 'error' : ''
  }

  async function api(path, init) {
    const response = await fetch(path, init)
    const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }))
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`)
    return body
  }

  /** Runs `task` now and every `intervalMs`, reporting failures in the status line. */
  function every(intervalMs, task) {
    let running = false
    const run = async () => {
      if (running) return
      running = true
      try {
        await task()
        if (failures > 0) failures--
        if (failures === 0) setStatus(`updated ${new Date().toLocaleTimeString()}`, false)
      } catch (error) {
        failures = 3
        setStatus(`error: ${error.message}`, true)
      } finally {
        running = false
      }
    }
    run()
    setInterval(run, intervalMs)
  }

  // ---- tabs ----------------------------------------------------------------------------
  function showTab() {
    const tab = (location.hash || '#overview').slice(1)
    for (const view of document.querySelectorAll('[data-view]')) view.hidden = view.id !== tab
    for (const link of document.querySelectorAll('nav a'))
      link.classList.toggle('active', link.dataset.tab === tab)
  }
  window.addEventListener('hashchange', showTab)
  showTab()

  // ---- overview ------------------------------------------------------------------------
  function card(label, value, bad, id) {
    return h('div', { class: bad ? 'card bad' : 'card', 'data-card': id }, label, h('b', {}, value))
  }

  let topicAdmin = false
  async function refreshCluster() {
    const c = await api('/api/cluster')
    topicAdmin = c.topicAdmin
    $('topic-admin').hidden = !topicAdmin
    const offlineBrokers = c.brokers.filter((b) => b.status === 'offline').length
    $('summary').replaceChildren(
      card(
        'Brokers online',
        `${c.brokers.length - offlineBrokers} / ${c.brokers.length}`,
        offlineBrokers > 0,
        'brokers',
      ),
      card('Controller', c.controllerId, c.controllerId < 0, 'controller'),
      card('Topics', c.topics, false, 'topics'),
      card('Partitions', c.partitions, false, 'partitions'),
      card('Offline partitions', c.offlinePartitions, c.offlinePartitions > 0, 'offline-partitions'),
      card(
        'Under-replicated',
        c.underReplicatedPartitions,
        c.underReplicatedPartitions > 0,
        'under-replicated',
      ),
    )
    fill(
      $('brokers'),
      ['ID', 'Host', 'Port', 'Rack', 'Status', 'Role'],
      c.brokers.map((b) =>
        h(
          'tr',
          { 'data-broker': b.nodeId, 'data-status': b.status },
          h('td', {}, b.nodeId),
          h('td', {}, b.host ?? '-'),
          h('td', {}, b.port ?? '-'),
          h('td', {}, b.rack ?? '-'),
          h('td', { class: b.status }, b.status),
          h('td', {}, [b.controller ? 'controller' : '', b.nodeId === c.servedBy ? ' (this console)' : '']),
        ),
      ),
    )
  }

  // ---- rates and charts ----------------------------------------------------------------
  let lastRates = null
  const history = { in: [], out: [] }

  function drawChart(svg, points) {
    const max = Math.max(1, ...points)
    const step = 300 / (CHART_POINTS - 1)
    const offset = CHART_POINTS - points.length
    const coords = points.map(
      (v, i) => `${((offset + i) * step).toFixed(1)},${(78 - (v / max) * 74).toFixed(1)}`,
    )
    svg.replaceChildren()
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline')
    line.setAttribute('points', coords.join(' '))
    svg.append(line)
  }

  function formatBytes(n) {
    if (n >= 1048576) return `${(n / 1048576).toFixed(1)} MiB`
    if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`
    return `${Math.round(n)} B`
  }

  async function refreshRates() {
    const r = await api('/api/rates')
    $('rates-broker').textContent = `(broker ${r.brokerId}: what it leads)`
    if (lastRates) {
      const seconds = Math.max(0.001, (r.atMs - lastRates.atMs) / 1000)
      const before = new Map(lastRates.topics.map((t) => [t.topic, t]))
      const rows = r.topics.map((t) => {
        const b = before.get(t.topic) || { bytesIn: 0, messagesIn: 0, bytesOut: 0 }
        return {
          topic: t.topic,
          bytesIn: (t.bytesIn - b.bytesIn) / seconds,
          messagesIn: (t.messagesIn - b.messagesIn) / seconds,
          bytesOut: (t.bytesOut - b.bytesOut) / seconds,
        }
      })
      const totalIn = rows.reduce((s, t) => s + t.bytesIn, 0)
      const totalOut = rows.reduce((s, t) => s + t.bytesOut, 0)
      for (const [key, value] of [
        ['in', totalIn],
        ['out', totalOut],
      ]) {
        history[key].push(value)
        if (history[key].length > CHART_POINTS) history[key].shift()
      }
      drawChart($('chart-in'), history.in)
      drawChart($('chart-out'), history.out)
      $('chart-in-now').textContent = `${formatBytes(totalIn)}/s`
      $('chart-out-now').textContent = `${formatBytes(totalOut)}/s`
      fill(
        $('rates'),
        ['Topic', 'Produce/s', 'Records/s', 'Fetch/s'],
        rows.map((t) =>
          h(
            'tr',
            {},
            h('td', {}, t.topic),
            h('td', {}, formatBytes(t.bytesIn)),
            h('td', {}, t.messagesIn.toFixed(1)),
            h('td', {}, formatBytes(t.bytesOut)),
          ),
        ),
      )
    }
    lastRates = r
  }

  // ---- topics --------------------------------------------------------------------------
  let knownTopics = []
  async function refreshTopics() {
    const internal = $('show-internal').checked
    const topics = await api(`/api/topics${internal ? '?internal=true' : ''}`)
    knownTopics = topics.map((t) => ({ name: t.name, partitions: t.partitions.length }))
    updateBrowseTopics()
    $('topic-list').replaceChildren(
      ...topics.map((t) =>
        h(
          'div',
          { 'data-topic': t.name },
          h(
            'h3',
            {},
            t.name,
            ` (${t.partitions.length} partitions)`,
            topicAdmin && !t.internal ? h('button', { 'data-delete': t.name }, 'delete') : null,
          ),
          partitionTable(t),
        ),
      ),
    )
  }

  function partitionTable(t) {
    const table = h('table', {})
    fill(
      table,
      ['Partition', 'Leader', 'Replicas', 'ISR', 'Log start', 'High watermark', 'Log end', 'Size'],
      t.partitions.map((p) =>
        h(
          'tr',
          { 'data-partition': p.partition },
          h('td', {}, p.partition),
          h('td', { class: p.leader < 0 ? 'offline' : '' }, p.leader < 0 ? 'offline' : p.leader),
          h('td', {}, p.replicas.join(', ')),
          h('td', { class: p.underReplicated ? 'warn' : '' }, p.isr.join(', ')),
          h('td', {}, p.logStartOffset ?? '-'),
          h('td', {}, p.highWatermark ?? '-'),
          h('td', {}, p.logEndOffset ?? '-'),
          h('td', {}, p.sizeBytes === null ? '-' : formatBytes(p.sizeBytes)),
        ),
      ),
    )
    return table
  }

  $('show-internal').addEventListener('change', () =>
    refreshTopics().catch((e) => setStatus(e.message, true)),
  )
  $('topic-list').addEventListener('click', async (event) => {
    const name = event.target.dataset?.delete
    if (!name || !window.confirm(`Delete topic ${name}?`)) return
    try {
      await api(`/api/topics/${encodeURIComponent(name)}`, { method: 'DELETE' })
      await refreshTopics()
    } catch (error) {
      setStatus(`delete failed: ${error.message}`, true)
    }
  })
  $('create-topic').addEventListener('submit', async (event) => {
    event.preventDefault()
    const form = new FormData(event.target)
    const spec = { name: form.get('name') }
    if (form.get('partitions')) spec.partitions = Number(form.get('partitions'))
    if (form.get('replicationFactor')) spec.replicationFactor = Number(form.get('replicationFactor'))
    try {
      await api('/api/topics', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(spec),
      })
      event.target.reset()
      await refreshTopics()
    } catch (error) {
      setStatus(`create failed: ${error.message}`, true)
    }
  })

  // ---- groups --------------------------------------------------------------------------
  async function refreshGroups() {
    const groups = await api('/api/groups')
    if (groups.length === 0) {
      $('group-list').replaceChildren(h('p', {}, 'No consumer groups.'))
      return
    }
    $('group-list').replaceChildren(
      ...groups.map((g) => {
        const members = h('table', {})
        fill(
          members,
          ['Member', 'Client', 'Host', 'Assignment'],
          g.members.map((m) =>
            h(
              'tr',
              { 'data-member': m.memberId },
              h('td', {}, m.memberId),
              h('td', {}, m.clientId),
              h('td', {}, m.clientHost),
              h('td', {}, m.assignment.join(', ')),
            ),
          ),
        )
        const offsets = h('table', {})
        fill(
          offsets,
          ['Topic', 'Partition', 'Committed', 'High watermark', 'Lag'],
          g.partitions.map((p) =>
            h(
              'tr',
              { 'data-lag-partition': `${p.topic}-${p.partition}` },
              h('td', {}, p.topic),
              h('td', {}, p.partition),
              h('td', {}, p.committedOffset),
              h('td', {}, p.highWatermark ?? '-'),
              h('td', { 'data-lag': p.lag ?? '' }, p.lag ?? '-'),
            ),
          ),
        )
        return h(
          'div',
          { 'data-group': g.groupId },
          h(
            'h3',
            {},
            g.groupId,
            ` — ${g.state}, coordinator ${g.coordinator}, `,
            h('span', { 'data-total-lag': g.totalLag }, `lag ${g.totalLag}`),
          ),
          h('h4', {}, 'Members'),
          members,
          h('h4', {}, 'Offsets'),
          offsets,
        )
      }),
    )
  }

  // ---- message browser -----------------------------------------------------------------
  function updateBrowseTopics() {
    const select = $('browse-topic')
    const current = select.value
    const names = knownTopics.map((t) => t.name)
    if ([...select.options].map((o) => o.value).join('\0') === names.join('\0')) return
    select.replaceChildren(
      ...names.map((name) => h('option', { value: name, selected: name === current }, name)),
    )
  }

  function decodeBase64(text) {
    const binary = atob(text)
    const bytes = new Uint8Array(binary.length)
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
    return bytes
  }

  function show(base64, format) {
    if (base64 === null) return 'null'
    const bytes = decodeBase64(base64)
    if (format === 'hex') return [...bytes].map((b) => b.toString(16).padStart(2, '0')).join(' ')
    const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes)
    if (format === 'json') {
      try {
        return JSON.stringify(JSON.parse(text), null, 2)
      } catch {
        return `(not JSON) ${text}`
      }
    }
    return text
  }

  /** A value decoded by the broker with its schema (Confluent's wire format), or why not. */
  function showDecoded(rec) {
    if (rec.value === null) return 'null'
    const d = rec.decoded
    if (!d) return '(fetch again to decode)'
    if (d.error) return `(${d.error}) ${show(rec.value, 'hex')}`
    return `schema ${d.schemaId} (${d.schemaType})\n${JSON.stringify(d.value, null, 2)}`
  }

  let lastBrowse = null
  function renderRecords() {
    if (!lastBrowse) return
    const format = $('browse-format').value
    const r = lastBrowse
    $('browse-info').textContent =
      `${r.topic}-${r.partition}: ${r.records.length} record(s) from offset ${r.startOffset ?? '-'} (high watermark ${r.highWatermark ?? '-'})`
    fill(
      $('records'),
      ['Offset', 'Timestamp', 'Key', 'Value', 'Headers'],
      r.records.map((rec) =>
        h(
          'tr',
          { 'data-offset': rec.offset },
          h('td', {}, rec.offset),
          h('td', {}, new Date(rec.timestamp).toISOString()),
          h('td', { class: 'mono' }, show(rec.key, format)),
          h('td', { class: 'mono' }, format === 'registry' ? showDecoded(rec) : show(rec.value, format)),
          h(
            'td',
            { class: 'mono' },
            rec.headers.map((hd) => `${hd.key}=${show(hd.value, format)}`).join('\n'),
          ),
        ),
      ),
    )
  }

  $('browse-format').addEventListener('change', () => {
    if ($('browse-format').value === 'registry' && lastBrowse) $('browse').requestSubmit()
    else renderRecords()
  })
  $('browse').addEventListener('submit', async (event) => {
    event.preventDefault()
    const form = new FormData(event.target)
    const params = new URLSearchParams({
      topic: form.get('topic') || '',
      partition: form.get('partition') || '0',
    })
    const from = String(form.get('from') || '').trim()
    if (from !== '') params.set(form.get('mode') === 'timestamp' ? 'timestamp' : 'offset', from)
    if (form.get('format') === 'registry') params.set('decode', 'registry')
    try {
      lastBrowse = await api(`/api/messages?${params}`)
      renderRecords()
    } catch (error) {
      $('browse-info').textContent = `error: ${error.message}`
    }
  })

  // ---- schemas -------------------------------------------------------------------------
  // Read only while the tab is shown: the first registry request creates `_schemas`.
  const REGISTRY = '/schema-registry'
  async function registry(path) {
    const response = await fetch(`${REGISTRY}${path}`)
    const body = await response.json().catch(() => ({ message: `HTTP ${response.status}` }))
    if (!response.ok) throw new Error(`${body.message} (error code ${body.error_code ?? response.status})`)
    return body
  }

  let shownSubject = null
  async function showSchema(subject, version) {
    shownSubject = subject
    const found = await registry(`/subjects/${encodeURIComponent(subject)}/versions/${version}`)
    $('schema-title').textContent =
      `${found.subject} v${found.version}, id ${found.id} (${found.schemaType ?? 'AVRO'})`
    $('schema-text').textContent = found.schemaType === 'PROTOBUF' ? found.schema : prettyJson(found.schema)
  }

  function prettyJson(text) {
    try {
      return JSON.stringify(JSON.parse(text), null, 2)
    } catch {
      return text
    }
  }

  async function refreshSchemas() {
    if ($('schemas').hidden) return
    const subjects = await registry('/subjects')
    const rows = await Promise.all(
      subjects.map(async (subject) => {
        const versions = await registry(`/subjects/${encodeURIComponent(subject)}/versions`)
        const latest = await registry(`/subjects/${encodeURIComponent(subject)}/versions/latest`)
        const select = h(
          'select',
          { 'aria-label': `versions of ${subject}` },
          versions.map((v) => h('option', { value: v, selected: v === latest.version }, `v${v}`)),
        )
        select.addEventListener('change', () => showSchema(subject, select.value).catch(report))
        const link = h('a', { href: '#schemas', 'data-subject': subject }, subject)
        link.addEventListener('click', (event) => {
          event.preventDefault()
          showSchema(subject, select.value).catch(report)
        })
        return h(
          'tr',
          { 'data-subject-row': subject },
          h('td', {}, link),
          h('td', {}, select),
          h('td', {}, latest.id),
          h('td', {}, latest.schemaType ?? 'AVRO'),
        )
      }),
    )
    fill($('subjects'), ['Subject', 'Versions', 'Latest id', 'Type'], rows)
    if (subjects.length === 0) $('schema-info').textContent = 'No subjects registered.'
    if (shownSubject === null && subjects.length > 0) await showSchema(subjects[0], 'latest')
  }

  function report(error) {
    setStatus(`error: ${error.message}`, true)
  }

  window.addEventListener('hashchange', () => {
    if (location.hash === '#schemas') refreshSchemas().catch(report)
  })

  every(CLUSTER_POLL_MS, refreshCluster)
  every(DETAIL_POLL_MS, refreshSchemas)
  every(DETAIL_POLL_MS, refreshTopics)
  every(DETAIL_POLL_MS, refreshGroups)
  every(RATE_POLL_MS, refreshRates)
})()
