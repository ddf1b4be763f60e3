(** Printed by [make -C proofs]; tests/test_proofs.py checks that every theorem listed here
    is closed under the global context (no axioms, nothing admitted). *)
From Kina Require Import Rules Instances Soundness Calls MoreRules.
Print Assumptions Rules.s_broadcast_sound.
Print Assumptions Rules.s_mm_shape_sound.
Print Assumptions Instances.broadcast_sound.
Print Assumptions Instances.mm_shape_sound.
Print Assumptions Soundness.instantiate.
Print Assumptions Soundness.preservation.
Print Assumptions Soundness.progress.
Print Assumptions Soundness.subject_reduction.
Print Assumptions Soundness.type_safety.
Print Assumptions Calls.call_sound.
Print Assumptions MoreRules.reduce_sound.
Print Assumptions MoreRules.where_sound.
