(** * Calls: a call of a well-typed defn ([defn_ok]: its body's type provably equal to the
    declared result under its [where] assumptions) at an instance satisfying those
    assumptions, with arguments of the instance of its parameter types, is typed with the
    instance of its declared result ([call_sound]); with [type_safety] it runs to such a
    value. Arguments are bound by [let], in declared order. *)
From Coq Require Import List Arith String Lia.
From Kina Require Import Dims Types Rules Lang Instances Soundness.
Import ListNotations.

Lemma ty_equiv_inst : forall A i t u,
  ty_equiv A t u -> inst_ok A i -> inst_ty i t = inst_ty i u.
Proof.
  intros A i [dt [g fs] dv] [du [h fu] dw] [Hd [Hv [Hg Hf]]] [Ad _]; simpl in *; subst.
  unfold inst_ty, inst_shape; simpl; f_equal; f_equal.
  induction Hf; simpl; auto.
  rewrite (H _ Ad), IHHf; auto.
Qed.

Lemma bind_args_typed : forall i ps args G body T,
  Forall2 (fun p v => v = inst_ty i (snd p)) ps args ->
  rt_type i (rev (inst_ctx i ps) ++ G) body T ->
  rt_type i G (bind_args ps args body) T.
Proof.
  intros i ps args G body T H; revert G.
  induction H as [|[x t] v ps args Hv _ IH]; intros G R; simpl in *; auto.
  subst v; eapply R_Let; [apply R_Val|].
  apply IH; rewrite <- app_assoc in R; exact R.
Qed.

Theorem call_sound : forall f i args,
  defn_ok f -> inst_ok (d_where f) i ->
  Forall2 (fun p v => v = inst_ty i (snd p)) (d_params f) args ->
  rt_type i [] (bind_args (d_params f) args (d_body f)) (inst_ty i (d_result f)).
Proof.
  intros f i args [WG [t [Ht Heq]]] Ok Hargs.
  destruct (instantiate _ _ _ _ i Ht Ok WG) as [_ R].
  rewrite <- (ty_equiv_inst _ i _ _ Heq Ok).
  apply bind_args_typed; auto.
  rewrite app_nil_r; unfold inst_ctx in *; rewrite <- map_rev; exact R.
Qed.

