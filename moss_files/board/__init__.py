"""The board (Moe's task workflow) as files under `.moss/board/`.

Pure core (imports only the foundation and each other): `model` (vocabulary, records, queue
order), `files` (the file format), `shapes` (the JSON results), `rules` (state machine, plans
and rails, dependencies, claims, queries). Edge: `store` (the board files, their read cache
and the writers' lock). Use cases, by theme: `plans`, `claims`, `editing`, `teams`, `queries`,
sharing the steps in `usecase`; `operations` maps Moe's tool names onto them.
"""
