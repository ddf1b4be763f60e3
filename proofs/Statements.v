(** * Statements outside the proved fragment ([Admitted]; each is listed in README.md with
    what its proof would take). [Print Assumptions] on the proved theorems of Soundness.v
    does not mention these. *)
From Coq Require Import List Arith String.
From Kina Require Import Dims Types Rules Lang Soundness.
Import ListNotations.

(** A call of a well-typed defn with arguments of the instance of its parameter types runs
    to the instance of its declared result type. *)
Theorem call_sound : forall f i args,
  defn_ok f -> inst_ok (d_where f) i ->
  Forall2 (fun p v => v = inst_ty i (snd p)) (d_params f) args ->
  rt_type i [] (bind_args (d_params f) args (d_body f)) (inst_ty i (d_result f)).
Admitted.

(** Reductions: [(sum x :axis a)] removes axis [a] of a shape without a variadic group at a
    non-negative axis (or at a negative one past the group). *)
Definition remove_axis (s : shape) (a : nat) : shape :=
  Shape (group s) (firstn a (fixed s) ++ skipn (S a) (fixed s)).

Theorem reduce_sound : forall A i s a,
  group s = None -> a < List.length (fixed s) -> inst_ok A i ->
  inst_shape i (remove_axis s a)
  = firstn a (inst_shape i s) ++ skipn (S a) (inst_shape i s).
Admitted.
