#!/usr/bin/env python3
"""Writes crates/kube/src/list_types/builtin.rs: the list types of every built-in kind.

Reads the Go types of k8s.io/api at a release branch (a git checkout of
github.com/kubernetes/api) and keeps, per Go struct, the fields that lead to a list
with a merge behaviour:
- server-side apply's list type, as kube-openapi turns the markers into the schema
  structured-merge-diff merges by: `+listType` (`+listMapKey`) where given, else a
  `patchStrategy:"merge"` tag makes a map by its `patchMergeKey` (a set without one),
  else atomic;
- strategic merge patch's `patchStrategy`/`patchMergeKey` struct tags;
- the `+default` of a map key (the value a missing key takes).

Usage: list_types.py API_REPO REF > crates/kube/src/list_types/builtin.rs
(the table in the repository: kubernetes/api release-1.33, which k8s-openapi 0.29's
v1_33 feature is generated from).
"""
import re
import subprocess
import sys

repo, ref = sys.argv[1], sys.argv[2]


def git(*args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


files = [f for f in git("ls-tree", "-r", "--name-only", ref).split("\n")
         if f.endswith(".go") and "/" in f and not f.endswith("_test.go")
         and "generated" not in f and f.count("/") == 2]

structs = {}   # "core/v1.PodSpec" -> [(json, go_type_expr, tags, markers, pkg, imports)]
groups = {}    # "apps/v1" -> group name
imports_of = {}

for f in files:
    pkg = f.rsplit("/", 1)[0]
    text = git("show", f"{ref}:{f}")
    m = re.search(r'const GroupName = "([^"]*)"', text)
    if m:
        groups[pkg] = m.group(1)
    imps = imports_of.setdefault(pkg, {})
    for alias, path in re.findall(r'^\s*(\w+)?\s*"(k8s\.io/[^"]+)"', text, re.M):
        name = alias or path.rsplit("/", 1)[1]
        if path.startswith("k8s.io/api/"):
            imps[name] = path[len("k8s.io/api/"):]
        elif path == "k8s.io/apimachinery/pkg/apis/meta/v1":
            imps[name] = "meta/v1"
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^type (\w+) struct \{\s*$", lines[i])
        if not m:
            i += 1
            continue
        name = f"{pkg}.{m.group(1)}"
        fields = []
        markers = []
        depth = 1
        i += 1
        while i < len(lines) and depth > 0:
            line = lines[i].strip()
            i += 1
            if line.startswith("//"):
                mk = re.match(r"//\s*\+(?:k8s:)?(listType|listMapKey|default)=(.*)$", line)
                if mk:
                    markers.append((mk.group(1), mk.group(2).strip()))
                continue
            if line == "}":
                depth -= 1
                continue
            if line.endswith("{"):
                depth += 1  # an anonymous struct: not in API types
                continue
            fm = re.match(r"^(?:(\w+)\s+)?([\w\.\*\[\]]+)\s+`([^`]*)`", line)
            if fm and depth == 1:
                tags = dict(re.findall(r'(\w+):"([^"]*)"', fm.group(3)))
                fields.append((fm.group(1), fm.group(2), tags, markers))
            markers = []
        structs[name] = fields

# Struct types, their JSON fields: (json name, kind, element type, ssa, smp, default).
def resolve(pkg, t):
    t = t.lstrip("*")
    if "." in t:
        alias, base = t.split(".", 1)
        p = imports_of.get(pkg, {}).get(alias)
        return f"{p}.{base}" if p else None
    return f"{pkg}.{t}"


model = {}
for name, fields in structs.items():
    pkg = name.split(".")[0]
    out = []
    for (fname, ftype, tags, markers) in fields:
        js = tags.get("json", "")
        jname = js.split(",")[0]
        if jname == "-":
            continue
        if ",inline" in js or (fname is None and not jname):
            # Embedded: its fields are this struct's (TypeMeta, ObjectMeta inline).
            out.append(("<inline>", resolve(pkg, ftype), None, None, None, None))
            continue
        mk = dict()
        keys = []
        default = None
        for k, v in markers:
            if k == "listMapKey":
                keys.append(v)
            elif k == "default":
                default = v
            else:
                mk[k] = v
        is_list = ftype.lstrip("*").startswith("[]") and ftype.lstrip("*") != "[]byte"
        elem = resolve(pkg, ftype.lstrip("*")[2:]) if is_list else None
        ps = tags.get("patchStrategy", "")
        pk = tags.get("patchMergeKey")
        if is_list:
            lt = mk.get("listType")
            if lt == "map":
                ssa = ("map", tuple(keys))
            elif lt in ("set", "atomic"):
                ssa = (lt, ())
            elif "merge" in ps.split(","):
                ssa = ("map", (pk,)) if pk else ("set", ())
            else:
                ssa = ("atomic", ())
            smp = ("merge", pk) if "merge" in ps.split(",") else None
            out.append((jname, "list", elem, ssa, smp, None))
        elif not ftype.lstrip("*").startswith("map["):
            out.append((jname, "struct", resolve(pkg, ftype), None, None, default))
    model[name] = out


def flat(name, seen=()):
    """A struct's fields with the embedded ones spliced in."""
    res = []
    for f in model.get(name, []):
        if f[0] == "<inline>":
            if f[1] and f[1] not in seen:
                res.extend(flat(f[1], seen + (name,)))
        else:
            res.append(f)
    return res


kinds = []
for name, fields in structs.items():
    pkg, base = name.split(".")
    has_meta = any(f[2].get("json", "").startswith("metadata") and f[1].endswith("ObjectMeta")
                   for f in fields)
    has_type = any(f[0] is None and f[1].endswith("TypeMeta") for f in fields)
    if has_meta and has_type and pkg in groups:
        kinds.append((groups[pkg], pkg.split("/")[1], base, name))

roots = {k[3] for k in kinds}


# Which types matter: a merging list, or a path to one (ObjectMeta's lists are the
# code's own: every object has them, custom resources too).
interesting = {}


def matters(name, stack=()):
    if name in interesting:
        return interesting[name]
    if name in stack or name not in model or name.startswith("meta/"):
        return False
    keep = []
    for (j, kind, elem, ssa, smp, _d) in flat(name):
        if kind == "list":
            if ssa[0] != "atomic" or smp is not None:
                keep.append((j, kind, elem if elem and matters(elem, stack + (name,)) else None, ssa, smp))
        elif elem is None and kind == "struct":
            pass
    for (j, kind, typ, _s, _m, _d) in flat(name):
        if kind == "struct" and typ and matters(typ, stack + (name,)):
            keep.append((j, kind, typ, None, None))
        elif typ == "meta/v1.ObjectMeta" and name not in roots:
            # A template's metadata: ObjectMeta's lists, which the code knows.
            keep.append((j, kind, typ, None, None))
    interesting[name] = keep or False
    return interesting[name]


defaults = {}
elem_of = {}
for name in model:
    for (j, kind, typ, ssa, smp, d) in flat(name):
        if kind == "list":
            elem_of[(name, j)] = typ
for name in model:
    for (j, kind, typ, ssa, smp, d) in flat(name):
        if d is not None:
            defaults[(name, j)] = d

for n in sorted(model):
    matters(n)
used = sorted(n for n, v in interesting.items() if v)


def rs(s):
    return '"' + s + '"'


print("// @generated by crates/kube/tools/list_types.py from github.com/kubernetes/api")
print(f"// ({ref}): facts (field names, list types, merge keys, key defaults). Do not edit.")
print()
print("use super::{Field, Smp, Ssa, Type};")
print()
print("/// Every built-in kind (group, version, kind) with a merging list, and its root type;")
print("/// sorted.")
print("pub(super) static KINDS: &[(&str, &str, &str, &str)] = &[")
for g, v, k, n in sorted(kinds):
    if interesting.get(n):
        print(f"    ({rs(g)}, {rs(v)}, {rs(k)}, {rs(n)}),")
print("];")
print()
print("/// The types with a merging list at or under a field, sorted by name; each with its")
print("/// fields that lead to one, sorted by name.")
print("pub(super) static TYPES: &[Type] = &[")
for n in used:
    print(f"    Type {{ name: {rs(n)}, fields: &[")
    for (j, kind, typ, ssa, smp) in sorted(interesting[n]):
        t = f"Some({rs(typ)})" if typ else "None"
        if kind == "list":
            if ssa[0] == "map":
                keys = []
                for k in ssa[1]:
                    d = defaults.get((elem_of[(n, j)], k))
                    dd = "Some(" + rs(d.replace(chr(34), chr(92) + chr(34))) + ")" if d else "None"
                    keys.append(f"({rs(k)}, {dd})")
                s_ = "Ssa::Map(&[" + ", ".join(keys) + "])"
            elif ssa[0] == "set":
                s_ = "Ssa::Set"
            else:
                s_ = "Ssa::Atomic"
            m = "Smp::Replace" if smp is None else (f"Smp::By({rs(smp[1])})" if smp[1] else "Smp::Union")
            l = f"Some(({s_}, {m}))"
        else:
            l = "None"
        print(f"        Field {{ name: {rs(j)}, ty: {t}, list: {l} }},")
    print("    ] },")
print("];")
