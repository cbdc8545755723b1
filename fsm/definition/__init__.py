"""A workflow's definition: tables -> a validated, frozen WorkflowSpec; its checks, its
machine, guards, tools, versions, the registry of named workflows, how amounts are
shown."""
