#!/usr/bin/env python3
"""Import cycles between the modules (files) of a crate: `python3 scripts/module_cycles.py ir/src`.

Edges are `crate::a::b` and `super::x` paths resolved to files; paths through the crate root's
re-exports (`crate::Const`), `mod` declarations and uses between a module and its own
submodules (`super::` from a child) are not edges. Prints each strongly
connected component of more than one module; exit status 0 either way."""
import os, re, sys

root = sys.argv[1].rstrip('/')
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3]
            parts = rel.split(os.sep)
            if parts[-1] == 'mod':
                parts = parts[:-1]
            if parts == ['lib'] or parts == ['main']:
                parts = []
            files['::'.join(parts)] = p

def resolve(segs):
    # longest prefix of segs that names a module file
    for k in range(len(segs), 0, -1):
        m = '::'.join(segs[:k])
        if m in files:
            return m
    return None

edges = {m: set() for m in files}
for m, p in files.items():
    src = open(p).read()
    # drop tests modules
    src = re.split(r'#\[cfg\(test\)\]\s*mod tests', src)[0]
    src = re.sub(r'//[^\n]*', '', src)
    me = m.split('::') if m else []
    here = me
    def absolute(path):
        """A `crate::…` or `super::…` path as segments from the crate root."""
        segs = path.split('::')
        if segs[0] == 'crate':
            return segs[1:]
        base = list(here)
        while segs and segs[0] == 'super':
            base = base[:-1]; segs = segs[1:]
        return base + segs

    def add(segs):
        t = resolve(segs)
        if t is not None and t != m and t != '':
            edges[m].add(t)

    for path in re.findall(r'\b((?:crate|super)(?:::\w+)+)', src):
        add(absolute(path))
    # paths relative to this module: `child::item`, `self::child::item`
    for path in re.findall(r'(?<![\w:])((?:self::)?\w+(?:::\w+)+)', src):
        segs = path.split('::')
        if segs[0] in ('crate', 'super', 'std', 'core'):
            continue
        if segs[0] == 'self':
            segs = segs[1:]
        if '::'.join(here + segs[:1]) in files:
            add(here + segs)
    # braces: `use super::{a, b::c}`
    for base_path, inner in re.findall(r'\b((?:crate|super)(?:::\w+)*)::\{([^}]*)\}', src):
        segs = absolute(base_path)
        for item in inner.split(','):
            item = item.strip().split(' ')[0].split('::')
            if item[0]:
                add(segs + item)

def related(a, b):
    return a.startswith(b + '::') or b.startswith(a + '::')
for m in edges:
    edges[m] = {t for t in edges[m] if not related(m, t)}

# Tarjan
index = {}; low = {}; stack = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = c[0]; c[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        s = []
        while True:
            w = stack.pop(); on.discard(w); s.append(w)
            if w == v: break
        sccs.append(s)
for v in edges:
    if v not in index:
        strong(v)
cyc = [s for s in sccs if len(s) > 1]
for s in cyc:
    print('cycle:', ' '.join(sorted(s)))
    for a in sorted(s):
        print('   ', a, '->', ', '.join(sorted(e for e in edges[a] if e in s)))
if not cyc:
    print('no cycle')
